package daytona

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/sandbox"
)

// The sandbox's own tools report how large a command's output files are,
// and an agent with root in its sandbox can replace them. A reported size
// that is not a byte count must fail the collection, never turn into an
// uncapped download; and whatever a file holds, no more than the cap is
// read of it.
func TestCollectDistrustsTheSandbox(t *testing.T) {
	const limit = 64
	for _, tc := range []struct {
		name, sizes string
		wantErr     bool
	}{
		{"negative size", "-1 0", true},
		{"not a number", "lots 0", true},
		{"one number", "5", true},
		{"lying small size", "10 0", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var downloaded int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case strings.HasSuffix(r.URL.Path, "/process/execute"):
					io.WriteString(w, `{"exitCode":0,"result":"`+tc.sizes+`"}`)
				case strings.HasSuffix(r.URL.Path, "/files/download"):
					// A file far larger than any size the sandbox reported.
					n, _ := io.Copy(w, io.LimitReader(zeros{}, 1<<30))
					downloaded += n
				default:
					http.NotFound(w, r)
				}
			}))
			defer srv.Close()
			b, err := New(Options{APIURL: srv.URL, APIKey: "dtn_test", Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			h := sandbox.Handle{Backend: Name, ID: "sb", Meta: map[string]string{metaToolbox: srv.URL + "/toolbox"}}
			stdout, stderr := sandbox.NewOutputBuffer(limit), sandbox.NewOutputBuffer(limit)
			err = b.collect(context.Background(), h, "/tmp/o", "/tmp/e", limit, stdout, stderr)
			if tc.wantErr != (err != nil) {
				t.Fatalf("collect with sizes %q: %v", tc.sizes, err)
			}
			if stdout.Total() > limit {
				t.Fatalf("read %d bytes of output past a cap of %d", stdout.Total(), limit)
			}
		})
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
