// Package testimage builds the small local image the Docker sandbox tests
// run in. No registry is reachable from test machines, so the image is made
// from the host's statically linked busybox (Debian: busybox-static) and
// imported with the Engine API: no pull, no Dockerfile, about 2 MB.
//
// The image has /bin/busybox with a symlink for every applet (sh, ls, find,
// stat, setsid, wget, nc, ...), /usr/bin/env, /tmp (1777), /work owned by
// uid 1000, and /etc/passwd and /etc/group with root and a non-root user
// "sandbox" (1000:1000). PATH is /bin:/usr/bin.
package testimage

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// Repository is the image repository; the tag is derived from the busybox
// binary and the layout, so a changed recipe gets a new tag.
const Repository = "sandbot-test/busybox"

// layout versions the image recipe below; bump it when the recipe changes.
const layout = "1"

// Busybox is where the static busybox binary is looked for first; PATH is
// searched when it is missing.
const Busybox = "/bin/busybox"

// Client is the part of the Engine API Ensure needs; *client.Client
// implements it.
type Client interface {
	ImageInspect(ctx context.Context, image string, opts ...client.ImageInspectOption) (client.ImageInspectResult, error)
	ImageImport(ctx context.Context, source client.ImageImportSource, ref string, opts client.ImageImportOptions) (client.ImageImportResult, error)
}

var (
	mu    sync.Mutex
	built = map[string]bool{}
)

// Ensure returns the reference of the test image, building it if the
// daemon does not have it yet. It is safe to call from parallel tests and
// from several test binaries at once: callers in one process share one
// build, and processes serialize on a lock file, so the image is imported
// once per recipe.
func Ensure(ctx context.Context, cli Client) (ref string, err error) {
	bin, err := findBusybox()
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return "", fmt.Errorf("testimage: %w", err)
	}
	sum := sha256.Sum256(append([]byte(layout+"\x00"), data...))
	ref = Repository + ":" + layout + "-" + hex.EncodeToString(sum[:6])
	if err := ensure(ctx, cli, ref, bin, data); err != nil {
		return "", err
	}
	return ref, nil
}

// ensure imports the image as ref unless the daemon already has it.
func ensure(ctx context.Context, cli Client, ref, bin string, data []byte) error {
	mu.Lock()
	defer mu.Unlock()
	if built[ref] {
		return nil
	}
	unlock, err := lockFile(ctx)
	if err != nil {
		return err
	}
	defer unlock()

	if _, err := cli.ImageInspect(ctx, ref); err == nil {
		built[ref] = true
		return nil
	} else if !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("testimage: inspect %s: %w", ref, err)
	}
	applets, err := listApplets(ctx, bin)
	if err != nil {
		return err
	}
	rootfs, err := buildRootfs(data, applets)
	if err != nil {
		return err
	}
	resp, err := cli.ImageImport(ctx, client.ImageImportSource{Source: bytes.NewReader(rootfs), SourceName: "-"}, ref,
		client.ImageImportOptions{
			Message: "sandbot test image (busybox-static)",
			Changes: []string{`ENV PATH=/bin:/usr/bin`, `CMD ["/bin/sh"]`},
		})
	if err != nil {
		return fmt.Errorf("testimage: import %s: %w", ref, err)
	}
	err = readProgress(resp)
	resp.Close()
	if err != nil {
		return fmt.Errorf("testimage: import %s: %w", ref, err)
	}
	if _, err := cli.ImageInspect(ctx, ref); err != nil {
		return fmt.Errorf("testimage: %s missing after import: %w", ref, err)
	}
	built[ref] = true
	return nil
}

// findBusybox locates a statically linked busybox: a dynamic one would not
// run in an image without a C library.
func findBusybox() (string, error) {
	bin := Busybox
	if _, err := os.Stat(bin); err != nil {
		p, lerr := exec.LookPath("busybox")
		if lerr != nil {
			return "", errors.New("testimage: busybox not found; install busybox-static (apt-get install busybox-static)")
		}
		bin = p
	}
	f, err := elf.Open(bin)
	if err != nil {
		return "", fmt.Errorf("testimage: %s: %w", bin, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", fmt.Errorf("testimage: %s is dynamically linked; install busybox-static (apt-get install busybox-static)", bin)
		}
	}
	return bin, nil
}

// listApplets asks the host's busybox which applets it has.
func listApplets(ctx context.Context, bin string) ([]string, error) {
	out, err := exec.CommandContext(ctx, bin, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("testimage: %s --list: %w", bin, err)
	}
	var applets []string
	for _, a := range strings.Fields(string(out)) {
		if a != "busybox" && !strings.Contains(a, "/") {
			applets = append(applets, a)
		}
	}
	sort.Strings(applets)
	if len(applets) == 0 {
		return nil, fmt.Errorf("testimage: %s --list printed no applets", bin)
	}
	return applets, nil
}

// buildRootfs lays out the image's file system as a tar archive.
func buildRootfs(busybox []byte, applets []string) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := time.Unix(0, 0)
	dir := func(name string, mode int64, uid int) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: uid, Gid: uid, ModTime: mtime})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: mtime}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	link := func(name, target string) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777, ModTime: mtime})
	}
	steps := []func() error{
		func() error { return dir("bin", 0o755, 0) },
		func() error { return file("bin/busybox", 0o755, busybox) },
		func() error { return dir("etc", 0o755, 0) },
		func() error {
			return file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000:sandbox:/work:/bin/sh\n"))
		},
		func() error { return file("etc/group", 0o644, []byte("root:x:0:\nsandbox:x:1000:\n")) },
		func() error { return dir("root", 0o700, 0) },
		func() error { return dir("tmp", 0o1777, 0) },
		func() error { return dir("usr", 0o755, 0) },
		func() error { return dir("usr/bin", 0o755, 0) },
		func() error { return link("usr/bin/env", "/bin/busybox") },
		func() error { return dir("work", 0o755, 1000) },
	}
	for _, a := range applets {
		steps = append(steps, func() error { return link("bin/"+a, "busybox") })
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, fmt.Errorf("testimage: build rootfs: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("testimage: build rootfs: %w", err)
	}
	return buf.Bytes(), nil
}

// readProgress drains the daemon's JSON progress stream and returns the
// error it reports, if any.
func readProgress(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var msg struct {
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if msg.ErrorDetail != nil && msg.ErrorDetail.Message != "" {
			return errors.New(msg.ErrorDetail.Message)
		}
		if msg.Error != "" {
			return errors.New(msg.Error)
		}
	}
}
