package app

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// defaultDifferences are the CA flags draxr registers with a default of
// its own, on purpose, and why. A test fails when one of them does not
// differ, or when another registered CA flag's default differs.
func defaultDifferences() map[string]string {
	return map[string]string{
		"cloud-provider":             "draxr's providers are local, kwok, clusterapi and externalgrpc; CA's gce is not one of them (reach it through externalgrpc)",
		"leader-elect-resource-name": "draxr's own lease, so draxr-autoscaler never competes for CA's lease while both run",
		"user-agent":                 "requests name draxr-autoscaler in the API server's audit log",
	}
}

// registeredFlags are the flags draxr-autoscaler implements, without
// the compatibility table's.
func registeredFlags() *pflag.FlagSet {
	fs := pflag.NewFlagSet("draxr-autoscaler", pflag.ContinueOnError)
	(&options{}).addAllFlags(fs)
	return fs
}

// flagReference renders docs/flags.md: the flags draxr-autoscaler
// registers (name, default, help), then every Cluster Autoscaler flag and
// whether draxr supports it, warns about it or rejects it.
func flagReference() string {
	fs := registeredFlags()
	var b strings.Builder
	b.WriteString("# draxr-autoscaler flags\n\n")
	b.WriteString("Generated from the code by `DRAXR_UPDATE_DOCS=1 go test ./autoscaler/app -run TestFlagDocs`; do not edit by hand.\n\n")
	b.WriteString("## Flags\n\n| Flag | Default | Description |\n| --- | --- | --- |\n")
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		name := "`--" + f.Name + "`"
		if f.Shorthand != "" {
			name = "`-" + f.Shorthand + "`, " + name
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", name, code(f.DefValue), cell(f.Usage))
	})
	b.WriteString("\n## Cluster Autoscaler flags\n\n")
	b.WriteString("Every flag of the Cluster Autoscaler, with CA's default. **supported**: draxr-autoscaler registers it with CA's meaning " +
		"and default (unless the notes say otherwise). **warns**: accepted and parsed; a warning at start-up names it and says why it has " +
		"no effect. **rejected**: a start-up error says why; where a value is named, that value (what draxr does anyway) is accepted " +
		"with a warning. Any other flag is an unknown-flag error.\n\n")
	b.WriteString("| CA flag | CA default | draxr | Notes |\n| --- | --- | --- | --- |\n")
	table := map[string]compatEntry{}
	for _, e := range compatTable() {
		table[e.name] = e
	}
	diffs := defaultDifferences()
	for _, f := range caFlags() {
		status, notes := "", ""
		if rf := fs.Lookup(f.name); rf != nil {
			status = "supported"
			if why, ok := diffs[f.name]; ok {
				notes = fmt.Sprintf("default %s: %s", code(rf.DefValue), why)
			}
		} else if e, ok := table[f.name]; ok {
			status, notes = "warns", e.why
			if e.action == reject {
				status = "rejected"
				if e.accept != "" {
					status = "rejected unless " + code(e.accept)
				}
			}
		}
		fmt.Fprintf(&b, "| `--%s` | %s | %s | %s |\n", f.name, code(f.def), status, cell(notes))
	}
	return b.String()
}

func code(s string) string {
	if s == "" {
		return `""`
	}
	return "`" + s + "`"
}

// cell keeps text inside one table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
