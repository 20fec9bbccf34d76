package integration

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/chat"
	"github.com/sandbot/sandbot/config"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/session"
)

// Attacks on the local sandbox, end to end: a scripted model runs the
// attacker's commands through the real worker and the real local backend,
// approval mode "never", and each subtest checks from the host that the
// attack got nowhere. Against the unconfined backend
// (SANDBOT_SANDBOX_LOCAL_UNCONFINED=true, as before confinement, on a root
// worker) every one of them gets through.

// attackEnv is one stack shared by the attacks, each in its own session.
type attackEnv struct {
	*stack
	dir    string // the stack's state directory (workspaces, snapshots)
	secret string // a file planted outside every workspace
	canary string // its content, and the decoy's environment marker
	decoy  *exec.Cmd
	n      int
}

func newAttackEnv(t *testing.T, opts ...stackOption) *attackEnv {
	s := newStack(t, append([]stackOption{noApprovals}, opts...)...)
	e := &attackEnv{stack: s, dir: filepath.Dir(s.cfg.Sandbox.LocalRoot), canary: "canary-" + strconv.Itoa(os.Getpid()) + "-q7z"}
	// Stand-ins for the dev server's state beside the workspaces: its
	// database and a planted file.
	e.secret = filepath.Join(e.dir, "secret.txt")
	for _, p := range []string{e.secret, filepath.Join(e.dir, "temporal.db")} {
		if err := os.WriteFile(p, []byte(e.canary+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A worker-like host process holding the model key in its environment
	// (the test binary's own environment is the test runner's).
	e.decoy = exec.Command("sleep", "6001"+strconv.Itoa(os.Getpid()%1000))
	e.decoy.Env = []string{"SANDBOT_MODEL_API_KEY=" + s.cfg.Model.APIKey, "ATTACK_CANARY=" + e.canary}
	if err := e.decoy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.decoy.Process.Kill(); _ = e.decoy.Wait() })
	return e
}

// run runs cmds as one shell call in session th and returns what the
// model was shown (and the call's rendered output).
func (e *attackEnv) run(t *testing.T, th chat.Thread, cmds ...string) string {
	t.Helper()
	e.n++
	id := fmt.Sprintf("a%d", e.n)
	e.model.Push(fakeopenai.ToolCallStep(id, "shell", shell(cmds...)), fakeopenai.FinalStep("done "+id))
	e.say(th, "ev-"+id, "attack "+id)
	ts := e.waitState(th, "attack "+id+" to finish", func(ts session.TurnState) bool {
		return done(ts) && len(ts.ToolCalls) > 0 && ts.ToolCalls[len(ts.ToolCalls)-1].CallID == id
	})
	c := ts.ToolCalls[len(ts.ToolCalls)-1]
	if c.Status != session.CallCompleted {
		t.Fatalf("call %s did not complete: %s", id, dump(ts))
	}
	return toolResultFor(e.model, id) + "\n" + c.Output
}

// workspaceHolds reports whether any file under the stack's workspaces
// contains s.
func (e *attackEnv) workspaceHolds(t *testing.T, s string) bool {
	found := false
	_ = filepath.WalkDir(e.cfg.Sandbox.LocalRoot, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), s) {
				t.Logf("%s holds %q", p, s)
				found = true
			}
		}
		return nil
	})
	return found
}

// printed drops the "$ command" lines from a call's output, so what is
// checked is what the commands printed, not their text.
func printed(out string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(out, "\n") {
		if !strings.HasPrefix(line, "$ ") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

func refuteOutput(t *testing.T, out string, what ...string) {
	t.Helper()
	out = printed(out)
	for _, w := range what {
		if strings.Contains(out, w) {
			t.Errorf("the command's output holds %q:\n%s", w, out)
		}
	}
}

func TestLocalSandboxAttacks(t *testing.T) {
	e := newAttackEnv(t)
	key := e.cfg.Model.APIKey

	t.Run("ModelKeyThroughProcEnviron", func(t *testing.T) {
		out := e.run(t, e.thread("environ"),
			`grep -a -h -o 'SANDBOT_[A-Z_]*=[^[:cntrl:]]*' /proc/*/environ > found.txt; cat found.txt; true`,
			`for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' < $f; echo; done`)
		refuteOutput(t, out, key, e.canary, filepath.Base(os.Args[0]), "sleep 6001")
		if e.workspaceHolds(t, key) || e.workspaceHolds(t, e.canary) {
			t.Error("the model key or the decoy's environment reached the workspace")
		}
	})

	t.Run("DevServerStateAndPlantedFiles", func(t *testing.T) {
		out := e.run(t, e.thread("state"),
			"cat "+filepath.Join(e.dir, "temporal.db")+" "+e.secret+" 2>/dev/null; true",
			"ls -la "+e.dir+" "+strings.TrimPrefix(e.cfg.Sandbox.SnapshotURL, "file://")+" 2>/dev/null; true")
		refuteOutput(t, out, e.canary, "secret.txt", "temporal.db")
	})

	t.Run("TemporalFrontend", func(t *testing.T) {
		host, port, _ := strings.Cut(srv.HostPort(), ":")
		if host == "" || host == "localhost" {
			host = "127.0.0.1"
		}
		out := e.run(t, e.thread("frontend"),
			fmt.Sprintf(`bash -c 'exec 3<>/dev/tcp/%s/%s' 2>/dev/null && echo CONN""ECTED || echo ref""used`, host, port),
			`tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '`)
		if p := printed(out); strings.Contains(p, "CONNECTED") || !strings.Contains(p, "refused") {
			t.Errorf("a command reached the Temporal frontend at %s:\n%s", srv.HostPort(), out)
		}
		if p := printed(out); strings.Contains(p, "eth") || strings.Contains(p, "docker") {
			t.Errorf("a command sees the host's network interfaces:\n%s", out)
		}
	})

	t.Run("SymlinkOutOfTheWorkspace", func(t *testing.T) {
		out := e.run(t, e.thread("symlink"),
			"ln -s "+e.secret+" s && cat s 2>&1; true",
			"ln -s / root && cat root"+e.secret+" 2>&1; ls root"+e.dir+" 2>/dev/null; true",
			"ln -s /etc/shadow sh && cat sh 2>&1; true")
		refuteOutput(t, out, e.canary, "root:x")
	})

	t.Run("WriteOutsideTheWorkspace", func(t *testing.T) {
		planted := filepath.Join(e.dir, "planted.txt")
		sys := fmt.Sprintf("/etc/sandbot-attack-%d", os.Getpid())
		t.Cleanup(func() { os.Remove(sys) })
		e.run(t, e.thread("write"),
			"echo x > "+planted+" 2>&1; true",
			"touch "+sys+" 2>&1; true")
		for _, p := range []string{planted, sys} {
			if _, err := os.Stat(p); err == nil {
				os.Remove(p)
				t.Errorf("a command wrote %s on the host", p)
			}
		}
	})

	t.Run("UnprivilegedAndSetuidDoesNothing", func(t *testing.T) {
		out := e.run(t, e.thread("setuid"),
			"id -u",
			"cp /usr/bin/id ./myid && chmod 4755 ./myid && ./myid -u",
			"su -c 'id -u' root 2>&1 </dev/null; cat /etc/shadow 2>&1; true")
		if !strings.Contains(out, "$ id -u\n1000\n") || strings.Contains(printed(out), "\n0\n") || strings.Contains(printed(out), "root:") {
			t.Errorf("a command ran privileged or read /etc/shadow:\n%s", out)
		}
	})

	t.Run("ForkLoopIsBounded", func(t *testing.T) {
		// Background subshells blocked on a FIFO: forks without execs, so
		// the loop is quick. It tries more than the limit allows.
		out := e.run(t, e.thread("fork"),
			`mkfifo f; (n=0; while [ $n -lt 2300 ]; do read x < f & n=$((n+1)); done) 2>/dev/null; set -- /proc/[0-9]*; echo "procs=$#"`)
		out = printed(out)
		i := strings.Index(out, "procs=")
		if i < 0 {
			t.Fatalf("no count in %s", out)
		}
		n, _ := strconv.Atoi(strings.Fields(out[i+len("procs="):])[0])
		if n > 2048 || n < 1000 {
			t.Errorf("%d processes ran; want the limit of 2048 reached and held", n)
		}
	})

	t.Run("WorkerProcessesInvisibleAndUnkillable", func(t *testing.T) {
		pid := strconv.Itoa(e.decoy.Process.Pid)
		out := e.run(t, e.thread("kill"),
			"kill -9 "+pid+" 2>&1; kill -9 "+strconv.Itoa(os.Getpid())+" 2>&1; true",
			`ls -d /proc/[0-9]* | wc -l`)
		if !alive(e.decoy.Process.Pid) {
			t.Errorf("a command killed a host process:\n%s", out)
		}
		if i := strings.Index(out, "$ ls -d /proc/[0-9]* | wc -l\n"); i >= 0 {
			if n, _ := strconv.Atoi(strings.Fields(out[i+len("$ ls -d /proc/[0-9]* | wc -l\n"):])[0]); n > 10 {
				t.Errorf("a command sees %d processes:\n%s", n, out)
			}
		}
	})

	t.Run("MountFails", func(t *testing.T) {
		out := e.run(t, e.thread("mount"),
			`mkdir -p m && mount -t tmpfs none m 2>/dev/null && umount m && echo MOUNT""ED || echo refused`,
			`unshare -Urm true 2>/dev/null && echo UNSHA""RED || echo refused`)
		refuteOutput(t, out, "MOUNTED", "UNSHARED")
	})

	t.Run("AnotherSessionsWorkspace", func(t *testing.T) {
		victim := e.run(t, e.thread("victim"), "echo "+e.canary+"-victim > mine.txt && pwd")
		ws := strings.TrimSpace(strings.Split(victim[strings.Index(victim, "$ echo"):], "\n")[1])
		if !strings.HasPrefix(ws, e.cfg.Sandbox.LocalRoot) {
			t.Fatalf("victim's workspace %q not under %s:\n%s", ws, e.cfg.Sandbox.LocalRoot, victim)
		}
		out := e.run(t, e.thread("thief"),
			"cat "+ws+"/mine.txt 2>/dev/null; ls -A "+e.cfg.Sandbox.LocalRoot+" 2>/dev/null; true")
		refuteOutput(t, out, e.canary+"-victim", filepath.Base(ws))
	})

	t.Run("SetsidDoesNotSurviveTheCommand", func(t *testing.T) {
		arg := "6002" + strconv.Itoa(os.Getpid()%1000)
		out := e.run(t, e.thread("setsid"),
			`setsid sleep `+arg+` & p=$!; while [ "$(cat /proc/$p/comm 2>/dev/null)" != sleep ]; do :; done; echo started`)
		if !strings.Contains(out, "started") {
			t.Fatalf("the escape never started:\n%s", out)
		}
		// The turn is over, so the command has returned: nothing of it may
		// run on the host any more.
		if pids := hostProcsWith(t, arg); len(pids) != 0 {
			t.Errorf("setsid sleep %s outlived its command: host pids %v", arg, pids)
		}
	})
}

// hostProcsWith returns the live host processes with arg among their
// arguments.
func hostProcsWith(t *testing.T, arg string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, d := range entries {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		if err != nil {
			continue
		}
		for _, a := range strings.Split(string(b), "\x00") {
			if a == arg && alive(pid) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// TestLocalSandboxStatesItsConfinement: the worker's local backend is the
// confined one by default, and says so.
func TestLocalSandboxStatesItsConfinement(t *testing.T) {
	cfg := config.Load()
	if cfg.Sandbox.LocalUnconfined || cfg.Sandbox.LocalNetwork {
		t.Fatal("confinement is not the default")
	}
	e := newAttackEnv(t)
	out := e.run(t, e.thread("whoami"), "id -u", "hostname")
	if !strings.Contains(out, "$ id -u\n1000") || !strings.Contains(out, "$ hostname\nsandbot") {
		t.Errorf("the worker's local backend does not run confined:\n%s", out)
	}
}
