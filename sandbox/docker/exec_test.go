package docker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/moby/moby/client"

	"github.com/sandbot/sandbot/sandbox"
	"github.com/sandbot/sandbot/sandbox/docker"
	"github.com/sandbot/sandbot/sandbox/sandboxtest"
)

func TestExecExitCodesAndStreams(t *testing.T) {
	b := newBackend(t, docker.Options{})
	h := sandboxtest.NewSandbox(t, b)
	for _, tc := range []struct {
		cmd            string
		code           int
		stdout, stderr string
	}{
		{cmd: "echo out; echo err >&2; exit 5", code: 5, stdout: "out\n", stderr: "err\n"},
		{cmd: "exit 255", code: 255},
		{cmd: "kill -TERM $$", code: 143},
		{cmd: "printf 'a b'", stdout: "a b"},
		{cmd: "no-such-command-xyz", code: 127, stderr: "no-such-command-xyz: not found"},
	} {
		res := sandboxtest.Exec(t, b, h, sandbox.Cmd{Command: tc.cmd})
		if res.ExitCode != tc.code || res.Stdout != tc.stdout || !strings.Contains(res.Stderr, tc.stderr) {
			t.Errorf("%q: exit %d stdout %q stderr %q; want exit %d stdout %q stderr containing %q",
				tc.cmd, res.ExitCode, res.Stdout, res.Stderr, tc.code, tc.stdout, tc.stderr)
		}
		if res.TimedOut || res.Truncated {
			t.Errorf("%q: flags set: %+v", tc.cmd, res)
		}
	}
}

// running starts the given sleeps in the background and waits until each
// runs (its command line is in /proc), so a test that later finds them
// gone knows they were there to kill.
func running(secs ...string) string {
	var b strings.Builder
	for i, s := range secs {
		fmt.Fprintf(&b, "sleep %s & p%d=$!\n", s, i)
	}
	for i, s := range secs {
		fmt.Fprintf(&b, "until grep -q %s /proc/$p%d/cmdline 2>/dev/null; do sleep 0.01; done\n", s, i)
	}
	return b.String()
}

func TestExecTimeoutKillsWholeGroup(t *testing.T) {
	b := newBackend(t, docker.Options{})
	h := sandboxtest.NewSandbox(t, b)
	res := sandboxtest.Exec(t, b, h, sandbox.Cmd{
		Command: running("3131", "3132") + "echo started; touch started; wait; echo never",
		Timeout: 3 * time.Second,
	})
	if !res.TimedOut || res.ExitCode != 137 {
		t.Errorf("TimedOut %v exit %d, want true and 137", res.TimedOut, res.ExitCode)
	}
	if sandboxtest.Exec(t, b, h, sandbox.Cmd{Command: "test -e started"}).ExitCode != 0 {
		t.Fatalf("the command had not started its children when the timeout hit (stdout %q); the host is too slow for this test", res.Stdout)
	}
	if res.Stdout != "started\n" {
		t.Errorf("stdout %q, want only the output before the timeout", res.Stdout)
	}
	if res.Duration < 3*time.Second {
		t.Errorf("Duration %v is shorter than the timeout", res.Duration)
	}
	waitUntil(t, "the killed processes to disappear", func() bool {
		procs := processes(t, b, h)
		return !hasProcess(procs, "sleep 3131") && !hasProcess(procs, "sleep 3132")
	})
	// The wrapper removes its pid file once the command is over; the only
	// one left is that of the command looking.
	if got := sandboxtest.Sh(t, b, h, "ls -a /dev/shm | grep -c '^.sandbot-exec-'"); got != "1\n" {
		t.Errorf("%s pid files in /dev/shm, want 1 (the listing command's own)", strings.TrimSpace(got))
	}
}

func TestExecBackgroundJobsEndWithCommand(t *testing.T) {
	b := newBackend(t, docker.Options{})
	h := sandboxtest.NewSandbox(t, b)
	res := sandboxtest.Exec(t, b, h, sandbox.Cmd{Command: running("3141") + "echo done"})
	if res.ExitCode != 0 || res.TimedOut || res.Stdout != "done\n" {
		t.Fatalf("got %+v", res)
	}
	waitUntil(t, "the background job to be killed", func() bool {
		return !hasProcess(processes(t, b, h), "sleep 3141")
	})
}

func TestExecCancelKills(t *testing.T) {
	b := newBackend(t, docker.Options{})
	h := sandboxtest.NewSandbox(t, b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type outcome struct {
		res sandbox.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := b.Exec(ctx, h, sandbox.Cmd{Command: running("3151", "3152") + "touch started; wait"})
		done <- outcome{res, err}
	}()
	waitUntil(t, "the command to start", func() bool {
		return sandboxtest.Exec(t, b, h, sandbox.Cmd{Command: "test -e started"}).ExitCode == 0
	})
	cancel()
	o := <-done
	if !errors.Is(o.err, context.Canceled) {
		t.Errorf("error %v, want one wrapping context.Canceled", o.err)
	}
	if o.res.ExitCode != 137 {
		t.Errorf("exit code %d after cancel, want 137", o.res.ExitCode)
	}
	waitUntil(t, "the canceled processes to disappear", func() bool {
		procs := processes(t, b, h)
		return !hasProcess(procs, "sleep 3151") && !hasProcess(procs, "sleep 3152")
	})
}

func TestExecOutputCapKeepsHeadAndTail(t *testing.T) {
	b := newBackend(t, docker.Options{DefaultOutputCap: 1000})
	h := sandboxtest.NewSandbox(t, b)
	// 300,000 bytes of 2-byte runes between markers, on both streams.
	res := sandboxtest.Exec(t, b, h, sandbox.Cmd{Command: `
gen() { printf START; yes 'éé' | head -c 300000; printf END; }
gen; gen >&2`})
	for name, s := range map[string]string{"stdout": res.Stdout, "stderr": res.Stderr} {
		if len(s) > 1000 {
			t.Errorf("%s keeps %d bytes, cap 1000", name, len(s))
		}
		if !strings.HasPrefix(s, "START") || !strings.HasSuffix(s, "END") {
			t.Errorf("%s lost its head or tail: %.20q ... %.20q", name, s, s[max(0, len(s)-20):])
		}
		if !utf8.ValidString(s) || strings.ContainsRune(s, utf8.RuneError) {
			t.Errorf("%s: a cut rune became invalid UTF-8 or U+FFFD", name)
		}
	}
	if !res.Truncated || res.DroppedBytes < 2*(300000+8-1000) {
		t.Errorf("Truncated %v DroppedBytes %d; want true and at least %d", res.Truncated, res.DroppedBytes, 2*(300000+8-1000))
	}
	if res.Binary {
		t.Error("Binary set for valid UTF-8 output")
	}
}

func TestNetworkDisabledByDefault(t *testing.T) {
	b := newBackend(t, docker.Options{})
	h := sandboxtest.NewSandbox(t, b)
	if got := interfaces(t, b, h); !slices.Equal(got, []string{"lo"}) {
		t.Errorf("interfaces %v, want only lo", got)
	}
	res := sandboxtest.Exec(t, b, h, sandbox.Cmd{Command: "wget -q -T 5 -O- http://1.1.1.1/ && echo reached"})
	if res.ExitCode == 0 || strings.Contains(res.Stdout, "reached") {
		t.Errorf("wget to 1.1.1.1 succeeded without a network: %+v", res)
	}
	if info := inspect(t, h); string(info.Container.HostConfig.NetworkMode) != "none" {
		t.Errorf("network mode %q, want none", info.Container.HostConfig.NetworkMode)
	}
}

// The same probe sees an interface when a network is configured, so the
// check above can tell the two apart. A user-defined internal network
// keeps the test off the default bridge, which some hosts lack.
func TestNetworkConfigurable(t *testing.T) {
	cli, _ := testEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := fmt.Sprintf("sandbot-test-net-%d", time.Now().UnixNano())
	if _, err := cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{Driver: "bridge", Internal: true}); err != nil {
		t.Fatalf("create network: %v", err)
	}
	t.Cleanup(func() {
		if _, err := cli.NetworkRemove(context.Background(), name, client.NetworkRemoveOptions{}); err != nil {
			t.Errorf("remove network: %v", err)
		}
	})
	b := newBackend(t, docker.Options{Network: name})
	h := sandboxtest.NewSandbox(t, b)
	if got := interfaces(t, b, h); !slices.Contains(got, "eth0") {
		t.Errorf("interfaces %v on network %s, want eth0 among them", got, name)
	}
	if info := inspect(t, h); string(info.Container.HostConfig.NetworkMode) != name {
		t.Errorf("network mode %q, want %q", info.Container.HostConfig.NetworkMode, name)
	}
}

func interfaces(t *testing.T, b sandbox.Backend, h sandbox.Handle) []string {
	t.Helper()
	out := sandboxtest.Sh(t, b, h, `tail -n +3 /proc/net/dev | cut -d: -f1`)
	names := strings.Fields(out)
	slices.Sort(names)
	return names
}

func TestUnprivilegedUser(t *testing.T) {
	b := newBackend(t, docker.Options{})
	h := sandboxtest.NewSandbox(t, b)
	out := sandboxtest.Sh(t, b, h, `id -u; id -g; stat -c %u:%g .
grep -E '^(CapEff|CapBnd|NoNewPrivs):' /proc/self/status | tr -s '\t ' ' '`)
	want := "1000\n1000\n1000:1000\nCapBnd: 0000000000000000\nCapEff: 0000000000000000\nNoNewPrivs: 1\n"
	if got := sortLines(out); got != sortLines(want) {
		t.Errorf("identity and privileges:\n%s\nwant:\n%s", out, want)
	}
	hc := inspect(t, h).Container.HostConfig
	if hc.Init == nil || !*hc.Init {
		t.Error("container runs without an init process")
	}
	if hc.Memory != docker.DefaultMemory || hc.MemorySwap != docker.DefaultMemory || hc.NanoCPUs != 1e9 ||
		hc.PidsLimit == nil || *hc.PidsLimit != docker.DefaultPidsLimit {
		t.Errorf("limits: memory %d swap %d nanocpus %d pids %v", hc.Memory, hc.MemorySwap, hc.NanoCPUs, hc.PidsLimit)
	}
}

func sortLines(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func TestEnvironmentScrubbed(t *testing.T) {
	const secret = "hunter2-do-not-leak"
	t.Setenv("SANDBOT_TEST_SECRET", secret)
	t.Setenv("OPENAI_API_KEY", secret)
	b := newBackend(t, docker.Options{})
	h := sandboxtest.NewSandbox(t, b)
	out := sandboxtest.Sh(t, b, h, "env")
	if strings.Contains(out, secret) {
		t.Fatalf("the worker's secret reached the sandbox:\n%s", out)
	}
	allowed := map[string]bool{"PATH": true, "HOME": true, "LANG": true, "TERM": true, "HOSTNAME": true, "PWD": true, "SHLVL": true}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		k, _, _ := strings.Cut(line, "=")
		if !allowed[k] {
			t.Errorf("unexpected variable %q in the sandbox", line)
		}
	}
	if !strings.Contains(out, "HOME="+h.Workdir+"\n") || !strings.Contains(out, "PATH=/bin:/usr/bin\n") {
		t.Errorf("want HOME=%s and the image's PATH, got:\n%s", h.Workdir, out)
	}
}

// TestMaxFileBytes: one write cannot grow a file past the limit; it fails
// with "File too large" and the file stops there.
func TestMaxFileBytes(t *testing.T) {
	b := newBackend(t, docker.Options{MaxFileBytes: 1 << 20})
	h := sandboxtest.NewSandbox(t, b)
	out := sandboxtest.Sh(t, b, h, "head -c 3000000 /dev/zero > big; echo rc=$?; wc -c < big")
	if !strings.Contains(out, "rc=") || strings.Contains(out, "rc=0\n") {
		t.Errorf("writing past the limit did not fail: %q", out)
	}
	if !strings.HasSuffix(strings.TrimSpace(out), "1048576") {
		t.Errorf("file size after the refused write: %q, want 1048576", out)
	}
}
