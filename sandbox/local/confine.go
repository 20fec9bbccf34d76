package local

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrCannotConfine is wrapped by New when commands cannot be confined on
// this host (bubblewrap missing, user namespaces forbidden) and
// Options.Unconfined is not set. The assembly that builds the backend
// names the setting that opts into unconfined mode.
var ErrCannotConfine = errors.New("commands cannot be confined on this host")

// Defaults for the confinement's resource limits.
const (
	// DefaultMaxProcesses bounds the processes and threads of one command
	// tree. Generous, because compilers and test runners are thread-heavy.
	DefaultMaxProcesses = 2048
	// DefaultMaxDataBytes bounds each process's data segment (RLIMIT_DATA:
	// heap and private writable mappings, not reserved address space, so
	// runtimes that reserve large virtual ranges still start).
	DefaultMaxDataBytes = 4 << 30
	// DefaultTmpSize bounds the private /tmp of a command (memory-backed).
	DefaultTmpSize = 512 << 20
)

// sandboxUID is who commands run as inside the user namespace. The
// namespace maps it to the worker's own uid and nothing else, so files a
// command creates are the worker's on the host, and the command holds no
// capability outside its namespaces.
const sandboxUID = 1000

// etcAllowed are the /etc entries a command sees: what the C library,
// TLS and the shells read. Everything else in /etc stays out (shadow,
// gshadow, sudoers, ssh host keys, TLS private keys, /etc/environment,
// credentials that packages drop there): an allowlist, because a denylist
// misses whatever the next package installs. passwd and group are
// generated (see buildEtc).
var etcAllowed = []string{
	"alternatives", "bash.bashrc", "ca-certificates.conf", "debian_version",
	"gai.conf", "host.conf", "hosts", "inputrc", "ld.so.cache", "ld.so.conf",
	"ld.so.conf.d", "localtime", "magic", "magic.mime", "mime.types",
	"networks", "nsswitch.conf", "os-release", "profile", "protocols",
	"resolv.conf", "services", "ssl/certs", "ssl/openssl.cnf", "timezone",
}

// confinement is the prepared bwrap invocation: everything but the
// per-command workspace binding.
type confinement struct {
	bwrap  string
	shell  string
	args   []string // bwrap options up to (not including) the workspace bind
	limits string   // see rlimitScript
	// pidsBase is the pids cgroup under which each command gets its own,
	// or ""; pidsJoin is how a command gets into it.
	pidsBase string
	pidsJoin cgroupJoin
	// pidsPrefix names this root's command cgroups (so a sweep leaves
	// other roots' alone).
	pidsPrefix string
	describe   string
}

// prepareConfinement builds the bwrap arguments and checks, by running a
// probe command, that the kernel allows them.
func (b *Backend) prepareConfinement() (*confinement, error) {
	o := b.opts
	bw := o.Bwrap
	if bw == "" {
		p, err := exec.LookPath("bwrap")
		if err != nil {
			return nil, fmt.Errorf("%w: bubblewrap (bwrap) is not installed (Debian/Ubuntu: apt-get install bubblewrap)", ErrCannotConfine)
		}
		bw = p
	}
	if _, err := os.Stat(bw); err != nil {
		return nil, fmt.Errorf("%w: bubblewrap at %s: %w", ErrCannotConfine, bw, err)
	}
	etc, err := buildEtc(b.root)
	if err != nil {
		return nil, fmt.Errorf("local: new: sandbox /etc: %w", err)
	}
	namespaces := []string{"user", "mnt", "pid", "ipc", "uts", "cgroup"}
	args := []string{
		"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--disable-userns", // no nested namespaces: no mount, no regained capabilities
		"--die-with-parent", "--new-session",
		"--uid", strconv.Itoa(sandboxUID), "--gid", strconv.Itoa(sandboxUID),
		"--hostname", "sandbot",
	}
	if o.Network {
		args = append(args, "--share-net")
	} else {
		args = append(args, "--unshare-net")
		namespaces = append(namespaces, "net")
	}
	args = append(args, "--ro-bind", "/usr", "/usr")
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
			continue
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(d)
			if err != nil {
				return nil, fmt.Errorf("local: new: %w", err)
			}
			args = append(args, "--symlink", target, d)
		case fi.IsDir():
			args = append(args, "--ro-bind", d, d)
		}
	}
	args = append(args,
		"--ro-bind", etc, "/etc",
		"--proc", "/proc",
		"--dev", "/dev",
		"--perms", "1777", "--size", strconv.FormatInt(o.TmpSize, 10), "--tmpfs", "/dev/shm",
		"--perms", "1777", "--size", strconv.FormatInt(o.TmpSize, 10), "--tmpfs", "/tmp",
	)
	c := &confinement{bwrap: bw, shell: b.shell, args: args, limits: rlimitScript(o, true)}
	if err := b.probe(c, ""); err != nil {
		return nil, err
	}
	// RLIMIT_NPROC does not bind a user that the namespace maps to host
	// root (the kernel exempts root's processes), so a root worker bounds
	// processes with a pids cgroup when it can make one.
	procLimit := "rlimit"
	if os.Geteuid() == 0 {
		procLimit = "none"
		if base, v2, err := pidsCgroupBase(); err != nil {
			b.log.Warn("local: no writable pids cgroup; a root worker cannot bound the processes of a command (RLIMIT_NPROC does not bind root)", "error", err)
		} else {
			c.pidsBase, c.pidsPrefix = base, "sandbot-"+b.instance+"-"
			c.sweepCgroups()
			if err := b.probeJoin(c, v2); err != nil {
				b.log.Warn("local: cannot start commands in a pids cgroup; a root worker cannot bound the processes of a command (RLIMIT_NPROC does not bind root)", "error", err)
				c.pidsBase = ""
			} else {
				procLimit = "pids cgroup"
			}
		}
	}
	net := "no network"
	if o.Network {
		net = "host network shared"
	}
	procs := fmt.Sprintf("%d processes (%s)", o.MaxProcesses, procLimit)
	if procLimit == "none" {
		procs = "processes not limited"
	}
	files := ""
	if o.MaxFileBytes > 0 {
		files = ", " + byteSize(o.MaxFileBytes/512*512) + " per file"
	}
	c.describe = fmt.Sprintf("confined (bubblewrap): namespaces %s; %s; uid %d; limits: %s, %d MiB data per process%s, %d MiB /tmp, command timeout",
		strings.Join(namespaces, ","), net, sandboxUID, procs, o.MaxDataBytes>>20, files, o.TmpSize>>20)
	return c, nil
}

// rlimitScript is the shell that applies the resource limits before a
// command: ulimit builtins of the shell that then runs the command, so they
// cost no process, on the command's own first line, so the command's line
// numbers (in its error messages) stay its own. Confined commands get all
// of them; unconfined ones only the file size limit. RLIMIT_NPROC is set
// in there, not on bwrap by the worker: set before bwrap creates the user
// namespace, it would be counted against the worker's uid on the host, so
// all commands together would share one budget.
func rlimitScript(o Options, confined bool) string {
	var limits []string
	if confined {
		limits = append(limits, "ulimit -c 0",
			fmt.Sprintf("{ ulimit -u %[1]d 2>/dev/null || ulimit -p %[1]d; }", o.MaxProcesses),
			fmt.Sprintf("ulimit -d %d", o.MaxDataBytes>>10))
	}
	if o.MaxFileBytes > 0 {
		// ulimit -f counts 512-byte blocks (POSIX). SIGXFSZ ignored (and an
		// ignored signal stays ignored across exec) makes a write past the
		// limit fail with EFBIG instead of killing the writer.
		limits = append(limits, fmt.Sprintf("ulimit -f %d", o.MaxFileBytes/512), "trap '' XFSZ")
	}
	if len(limits) == 0 {
		return ""
	}
	return strings.Join(limits, " && ") + " || { echo 'sandbot: cannot apply resource limits' >&2; exit 126; }; "
}

// byteSize formats n in the largest binary unit that divides it.
func byteSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// probe runs `true` the way Exec runs commands (in pids cgroup cg, unless
// ""), so a kernel or container that forbids the namespaces is found at
// start, not at the first command.
func (b *Backend) probe(c *confinement, cg string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	probeDir := filepath.Join(b.root, ".probe")
	if err := os.MkdirAll(probeDir, 0o700); err != nil {
		return fmt.Errorf("local: new: %w", err)
	}
	defer os.Remove(probeDir)
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("local: new: %w", err)
	}
	defer r.Close()
	cmd := exec.CommandContext(ctx, c.bwrap, c.command(probeDir, "true")...)
	cmd.Env = []string{"PATH=" + b.opts.Path}
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if cg == "" {
		err = cmd.Start()
	} else {
		err = c.startIn(cmd, cg)
	}
	w.Close()
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		if cg != "" {
			return fmt.Errorf("start in a pids cgroup (%s): %s", c.pidsJoin, msg)
		}
		return fmt.Errorf("%w: %s cannot create the sandbox's namespaces (user, mount, pid, ipc, uts, network): %s", ErrCannotConfine, c.bwrap, msg)
	}
	return nil
}

// probeJoin picks how commands join their pids cgroup: the cheap join of
// the hierarchy (v1 or v2) if a probe command runs with it, else the shell.
func (b *Backend) probeJoin(c *confinement, v2 bool) error {
	cg, err := c.pidsCgroup(b.opts.MaxProcesses)
	if err != nil {
		return err
	}
	defer removeCgroup(cg)
	c.pidsJoin = joinThread
	if v2 {
		c.pidsJoin = joinClone
	}
	if err = b.probe(c, cg); err == nil {
		return nil
	}
	b.log.Warn("local: the cheap pids cgroup join failed; commands join theirs through a shell", "join", c.pidsJoin.String(), "error", err)
	c.pidsJoin = joinShell
	return b.probe(c, cg)
}

// command returns the bwrap argument list that runs script with the shell
// in ws, after the worker check and the limits. The shell is the command's
// own (no second shell, no watcher: the PID namespace ends the command's
// processes), and $0 is the shell's path, as when sh -c runs a script. fd
// 3 must be the child's end of the command's worker pipe.
func (c *confinement) command(ws, script string) []string {
	args := make([]string, 0, len(c.args)+12)
	args = append(args, c.args...)
	return append(args, "--bind", ws, ws, "--chdir", ws, "--remount-ro", "/",
		"--", c.shell, "-c", workerAlive+c.limits+script, c.shell)
}

// buildEtc prepares the /etc that commands see, under root, and returns
// its directory: copies of the allowlisted entries (symlinks into /usr kept
// as links, others resolved to their content, so nothing outside the
// sandbox's view is needed), generated passwd and group (root, the sandbox
// user and nobody, so user lookups work and the host's account names stay
// out), and mtab. One bind of a prepared directory instead of a bind per
// entry: each mount costs bwrap a pass over the mount table, and 25 of them
// tripled the cost of a command. It is a snapshot taken when the backend
// starts; the directory is named by its content, so backends sharing a root
// never pull it from under each other.
func buildEtc(root string) (string, error) {
	staging := filepath.Join(root, ".etc-new-"+randomSuffix())
	if err := os.Mkdir(staging, 0o755); err != nil {
		return "", err
	}
	defer removeAll(staging)
	for _, e := range etcAllowed {
		if err := copyEtcEntry("/etc/"+e, filepath.Join(staging, e)); err != nil {
			return "", err
		}
	}
	files := map[string]string{
		"passwd": fmt.Sprintf("root:x:0:0:root:/root:/bin/sh\nsandbox:x:%[1]d:%[1]d:sandbox:/nonexistent:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", sandboxUID),
		"group":  fmt.Sprintf("root:x:0:\nsandbox:x:%[1]d:\nnogroup:x:65534:\n", sandboxUID),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(staging, name), []byte(content), 0o644); err != nil {
			return "", err
		}
	}
	if err := os.Symlink("/proc/self/mounts", filepath.Join(staging, "mtab")); err != nil {
		return "", err
	}
	sum, err := treeSum(staging)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, ".etc-"+sum)
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	if err := os.Rename(staging, dir); err != nil {
		if _, serr := os.Stat(dir); serr == nil {
			return dir, nil // another backend on this root made it first
		}
		return "", err
	}
	return dir, nil
}

// copyEtcEntry copies one allowlisted entry, and a directory's immediate
// entries; a missing entry is skipped.
func copyEtcEntry(src, dst string) error {
	fi, err := os.Lstat(src)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		resolved, err := filepath.EvalSymlinks(src)
		if err != nil {
			return nil // dangling: nothing to show
		}
		if strings.HasPrefix(resolved, "/usr/") {
			target, err := os.Readlink(src)
			if err != nil {
				return err
			}
			return os.Symlink(target, dst)
		}
		if fi, err = os.Stat(resolved); err != nil {
			return err
		}
		src = resolved
	}
	if fi.IsDir() {
		if err := os.Mkdir(dst, 0o755); err != nil {
			return err
		}
		entries, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		for _, e := range entries {
			p := filepath.Join(src, e.Name())
			if e.Type()&os.ModeSymlink != 0 {
				target, err := os.Readlink(p)
				if err != nil {
					return err
				}
				if err := os.Symlink(target, filepath.Join(dst, e.Name())); err != nil {
					return err
				}
				continue
			}
			if e.Type().IsRegular() {
				if err := copyFile(p, filepath.Join(dst, e.Name())); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	return copyFile(src, dst)
}

func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o644)
}

// treeSum hashes a directory tree's names, link targets and contents.
func treeSum(dir string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(h, "%s\x00%v\x00", rel, d.Type())
		switch {
		case d.Type()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			h.Write([]byte(target))
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(data)
		}
		h.Write([]byte{0})
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)[:8]), nil
}
