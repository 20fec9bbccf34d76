package fakee2b

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
)

// sandboxUID is the uid (and gid) commands run as, like E2B's "user".
const sandboxUID = 1000

// proc is one process envd started.
type proc struct {
	pid      int
	cmd      *exec.Cmd
	signaled atomic.Bool // killed by SendSignal or its deadline
}

// makeDirs creates the sandbox's /home/user and /tmp on the host, owned
// by the sandbox user.
func (sb *sbox) makeDirs() error {
	for _, d := range []struct {
		p    string
		mode os.FileMode
	}{{"home", 0o755}, {"home/user", 0o755}, {"tmp", 0o1777}} {
		p := filepath.Join(sb.dir, d.p)
		if err := os.Mkdir(p, d.mode); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("fakee2b: %w", err)
		}
		if err := os.Chmod(p, d.mode); err != nil {
			return fmt.Errorf("fakee2b: %w", err)
		}
		if d.p != "home" {
			if err := chownSandbox(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// chownSandbox gives a file the fake made to the sandbox user (when the
// fake runs as root; otherwise everything already belongs to one user).
func chownSandbox(p string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	if err := os.Lchown(p, sandboxUID, sandboxUID); err != nil {
		return fmt.Errorf("fakee2b: %w", err)
	}
	return nil
}

// hostRoot maps an absolute sandbox path to the host directory holding
// it and the path relative to that directory. Only /home and /tmp are the
// sandbox's own; the fake serves nothing else.
func (sb *sbox) hostRoot(p string) (root, rel string, ok bool) {
	p = path.Clean(p)
	for _, top := range []string{"/home", "/tmp"} {
		if p == top {
			return filepath.Join(sb.dir, top), ".", true
		}
		if r, found := strings.CutPrefix(p, top+"/"); found {
			return filepath.Join(sb.dir, top), r, true
		}
	}
	return "", "", false
}

// bwrapCmd builds the command that runs argv in the sandbox: the host
// file system read-only, the sandbox's /home and /tmp writable at their
// real paths, uid 1000, only env in the environment. No pid namespace, so
// signals reach exactly the processes they name, as in a real sandbox.
func (s *Server) bwrapCmd(sb *sbox, cwd string, env []string, argv []string) *exec.Cmd {
	args := []string{
		"--ro-bind", "/", "/",
		"--dev-bind", "/dev", "/dev",
		"--bind", filepath.Join(sb.dir, "home"), "/home",
		"--bind", filepath.Join(sb.dir, "tmp"), "/tmp",
		"--unshare-user", "--uid", fmt.Sprint(sandboxUID), "--gid", fmt.Sprint(sandboxUID),
		"--chdir", cwd,
		"--clearenv",
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		args = append(args, "--setenv", k, v)
	}
	args = append(args, "--")
	args = append(args, argv...)
	cmd := exec.Command(s.opts.Bwrap, args...)
	cmd.Env = []string{}
	// Its own process group, so nothing a command does to groups reaches
	// the test process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: sandboxUID, Gid: sandboxUID, Groups: []uint32{}}
	}
	return cmd
}

// startProc starts argv under bubblewrap and returns the pid of the
// command itself (not of bubblewrap), read from bubblewrap's info fd, with
// the read ends of its stdout and stderr.
func (s *Server) startProc(sb *sbox, cwd string, env, argv []string) (*proc, io.ReadCloser, io.ReadCloser, error) {
	cmd := s.bwrapCmd(sb, cwd, env, argv)
	cmd.Args = append(cmd.Args[:1], append([]string{"--info-fd", "3"}, cmd.Args[1:]...)...)
	infoR, infoW, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		infoR.Close()
		infoW.Close()
		return nil, nil, nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		infoR.Close()
		infoW.Close()
		outR.Close()
		outW.Close()
		return nil, nil, nil, err
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, nil, nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, outW, errW
	cmd.ExtraFiles = []*os.File{infoW}
	err = cmd.Start()
	devnull.Close()
	infoW.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		infoR.Close()
		outR.Close()
		errR.Close()
		return nil, nil, nil, err
	}
	var info struct {
		ChildPid int `json:"child-pid"`
	}
	derr := json.NewDecoder(infoR).Decode(&info)
	infoR.Close()
	if derr != nil || info.ChildPid == 0 {
		// bubblewrap failed before running the command; its stderr says why.
		msg, _ := io.ReadAll(io.LimitReader(errR, 4096))
		_ = cmd.Wait()
		outR.Close()
		errR.Close()
		return nil, nil, nil, fmt.Errorf("cannot start process: %s", strings.TrimSpace(string(msg)))
	}
	return &proc{pid: info.ChildPid, cmd: cmd}, outR, errR, nil
}

// killAll kills every process of the sandbox: the ones envd started and
// whatever they left running, found through their mount of the sandbox's
// /tmp. Processes can fork while it runs, so it repeats until none is left.
func (sb *sbox) killAll() {
	sb.procMu.Lock()
	for _, p := range sb.procs {
		p.signaled.Store(true)
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
	sb.procMu.Unlock()
	marker := "/" + filepath.Base(filepath.Dir(sb.dir)) + "/" + sb.id + "/tmp"
	for range 50 {
		found := false
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid := 0
			if _, err := fmt.Sscan(e.Name(), &pid); err != nil || pid <= 1 {
				continue
			}
			mi, err := os.ReadFile("/proc/" + e.Name() + "/mountinfo")
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(mi), "\n") {
				f := strings.Fields(line)
				if len(f) > 4 && f[4] == "/tmp" && strings.HasSuffix(f[3], marker) {
					found = true
					_ = syscall.Kill(pid, syscall.SIGKILL)
					break
				}
			}
		}
		if !found {
			return
		}
	}
}
