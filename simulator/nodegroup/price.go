package nodegroup

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// Price is what one node of a group costs per hour, in whatever currency
// the groups share: only comparisons between groups matter (the price
// expander). Written as a number (0.096) or a string ("0.096"); "" is
// unknown. The text is kept as written so that a bad value is reported by
// Validate, naming the group and field, rather than by the decoder.
type Price string

// UnmarshalJSON keeps the value's text: a string's contents, anything
// else (a number, or a mistake such as true) as it is.
func (p *Price) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*p = ""
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*p = Price(s)
	default:
		*p = Price(b)
	}
	return nil
}

// PriceOf is the Price of a value a provider reports.
func PriceOf(perHour float64) Price { return Price(strconv.FormatFloat(perHour, 'g', -1, 64)) }

// Value is the price per node per hour; known is false for "".
func (p Price) Value() (perHour float64, known bool, err error) {
	if p == "" {
		return 0, false, nil
	}
	f, err := strconv.ParseFloat(string(p), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false, fmt.Errorf("%q is not a number (the price of one node per hour, e.g. 0.096)", string(p))
	}
	if f < 0 {
		return 0, false, fmt.Errorf("%q is negative; a price is >= 0", string(p))
	}
	return f, true, nil
}
