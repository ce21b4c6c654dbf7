package app

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// CA's --profiling serves Go's profiles beside /metrics; without it the
// path is not found.
func TestServeProfiling(t *testing.T) {
	for _, profiling := range []bool{false, true} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			serve(ctx, l, http.NotFoundHandler(), profiling)
			close(done)
		}()
		resp, err := http.Get("http://" + l.Addr().String() + "/debug/pprof/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		listed := resp.StatusCode == http.StatusOK && strings.Contains(string(body), "goroutine")
		if listed != profiling {
			t.Errorf("--profiling=%v: GET /debug/pprof/ = %d, profiles listed %v", profiling, resp.StatusCode, listed)
		}
		cancel()
		<-done
	}
}
