package devserver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uioptions "github.com/temporalio/ui-server/v2/server/server_options"
)

// uiReadyTimeout bounds the wait for the UI's listener.
const uiReadyTimeout = 10 * time.Second

// uiServer is the Temporal Web UI (github.com/temporalio/ui-server, assets embedded) serving on
// loopback and talking to the frontend over gRPC.
type uiServer struct {
	srv  *uiserver.Server
	url  string
	done chan struct{}
}

// startUI serves the UI at http://127.0.0.1:port. The ui-server library ends the process if it
// cannot listen, so the port is checked first; only a port taken in the microseconds between
// the check and the bind escapes this.
func startUI(ctx context.Context, port int, frontend, namespace string) (_ *uiServer, err error) {
	if err := checkUIPort(port); err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(loopback, strconv.Itoa(port))

	cfg := &uiconfig.Config{
		TemporalGRPCAddress: frontend,
		Host:                loopback,
		Port:                port,
		EnableUI:            true,
		DefaultNamespace:    namespace,
		HideLogs:            true,
		DisableNewsFetch:    true, // no internet calls from a laptop dev server
		// The UI is plain http on loopback; a Secure CSRF cookie would not stick everywhere.
		CORS: uiconfig.CORS{CookieInsecure: true},
	}
	defer func() {
		if r := recover(); r != nil { // NewServer panics on a bad config
			err = fmt.Errorf("devserver: UI: %v", r)
		}
	}()
	u := &uiServer{
		srv:  uiserver.NewServer(uioptions.WithConfigProvider(cfg)),
		url:  "http://" + addr,
		done: make(chan struct{}),
	}
	go func() {
		defer close(u.done)
		_ = u.srv.Start() // returns nil once stopped
	}()
	if err := u.awaitReady(ctx); err != nil {
		u.srv.Stop() // not stop: the serve loop may not have started, so it may never end
		return nil, err
	}
	return u, nil
}

func checkUIPort(port int) error {
	probe, err := net.Listen("tcp", net.JoinHostPort(loopback, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("devserver: UI port %d is not available (0 disables the UI): %w", port, err)
	}
	return probe.Close()
}

// awaitReady polls the UI's health endpoint until it answers.
func (u *uiServer) awaitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, uiReadyTimeout)
	defer cancel()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.url+"/healthz", nil)
		if err != nil {
			return fmt.Errorf("devserver: UI: %w", err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("health check: %s", resp.Status)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("devserver: UI at %s did not come up: %v: %w", u.url, err, ctx.Err())
		case <-u.done:
			return fmt.Errorf("devserver: UI at %s stopped while starting: %v", u.url, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop closes the UI's listener and waits for its serve loop to end. Call it only after
// awaitReady succeeded. The library keeps its
// gRPC connection to the frontend open (it offers no way to close it); it only idles.
func (u *uiServer) stop() {
	u.srv.Stop()
	<-u.done
}
