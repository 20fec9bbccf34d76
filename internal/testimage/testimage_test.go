package testimage

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// daemon returns a client, skipping without a daemon unless CI=true.
func daemon(t *testing.T) *client.Client {
	t.Helper()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		msg := fmt.Sprintf("no Docker daemon answers at %s: %v", cli.DaemonHost(), err)
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s (CI=true: .ci/docker.sh starts one)", msg)
		}
		t.Skipf("%s; skipping (with CI=true this fails instead)", msg)
	}
	return cli
}

func TestBuildRootfsLayout(t *testing.T) {
	data, err := buildRootfs([]byte("ELF"), []string{"sh", "ls"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[hdr.Name] = fmt.Sprintf("%c %o %d:%d %s", hdr.Typeflag, hdr.Mode, hdr.Uid, hdr.Gid, hdr.Linkname)
	}
	for name, want := range map[string]string{
		"bin/busybox": "0 755 0:0 ",
		"bin/sh":      "2 777 0:0 busybox",
		"bin/ls":      "2 777 0:0 busybox",
		"tmp/":        "5 1777 0:0 ",
		"work/":       "5 755 1000:1000 ",
		"etc/passwd":  "0 644 0:0 ",
		"usr/bin/env": "2 777 0:0 /bin/busybox",
	} {
		if got[name] != want {
			t.Errorf("%s: %q, want %q", name, got[name], want)
		}
	}
}

// Ensure from many goroutines at once yields one image that runs as the
// sandbox user with the applets the Docker tests rely on.
func TestEnsure(t *testing.T) {
	cli := daemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	refs := make([]string, 4)
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range refs {
		wg.Go(func() { refs[i], errs[i] = Ensure(ctx, cli) })
	}
	wg.Wait()
	for i := range refs {
		if errs[i] != nil || refs[i] != refs[0] || !strings.HasPrefix(refs[i], Repository+":") {
			t.Fatalf("Ensure #%d: %q, %v (first: %q)", i, refs[i], errs[i], refs[0])
		}
	}
	out := runIn(t, cli, refs[0], `id; stat -c '%a %u' /tmp /work; echo $PATH
for a in sh find stat sort setsid kill wget nc yes head tr env; do command -v $a >/dev/null || echo missing $a; done`)
	want := "uid=1000(sandbox) gid=1000(sandbox) groups=1000(sandbox)\n1777 0\n755 1000\n/bin:/usr/bin\n"
	if out != want {
		t.Errorf("in the image:\n%s\nwant:\n%s", out, want)
	}
}

// The import path itself, under a throwaway tag so the shared image is
// never removed under other tests' feet.
func TestEnsureImportsWhenMissing(t *testing.T) {
	cli := daemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin, err := findBusybox()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	ref := fmt.Sprintf("%s:test-%d", Repository, time.Now().UnixNano())
	t.Cleanup(func() {
		_, _ = cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true})
	})
	if _, err := cli.ImageInspect(ctx, ref); !cerrdefs.IsNotFound(err) {
		t.Fatalf("throwaway image exists before the test: %v", err)
	}
	if err := ensure(ctx, cli, ref, bin, data); err != nil {
		t.Fatalf("ensure: %v", err)
	}
	if _, err := cli.ImageInspect(ctx, ref); err != nil {
		t.Fatalf("image missing after ensure: %v", err)
	}
	if out := runIn(t, cli, ref, "echo hello"); out != "hello\n" {
		t.Errorf("container output %q", out)
	}
}

// runIn runs a shell script in a fresh container of image with the
// network disabled, as the sandbox user, and returns its output.
func runIn(t *testing.T, cli *client.Client, image, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: image, User: "1000:1000", Cmd: []string{"sh", "-c", script}},
		HostConfig: &container.HostConfig{NetworkMode: "none"},
	})
	if err != nil {
		t.Fatalf("create container: %v", err)
	}
	defer cli.ContainerRemove(context.Background(), c.ID, client.ContainerRemoveOptions{Force: true})
	wait := cli.ContainerWait(ctx, c.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
		t.Fatalf("start container: %v", err)
	}
	select {
	case res := <-wait.Result:
		if res.StatusCode != 0 {
			t.Errorf("script exited %d", res.StatusCode)
		}
	case err := <-wait.Error:
		t.Fatalf("wait: %v", err)
	}
	logs, err := cli.ContainerLogs(ctx, c.ID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		t.Fatalf("logs: %v", err)
	}
	defer logs.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, logs); err != nil {
		t.Fatalf("read logs: %v", err)
	}
	return out.String()
}
