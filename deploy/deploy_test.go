// Package deploy tests the deployment files: docker-compose.yml (validated
// by Compose itself, then checked property by property), the test override
// deploy/compose.test.yml, .env.example against the configuration registry,
// and the Dockerfiles' targets and users.
//
// What this does not exercise: pulling or running the public images
// (PostgreSQL, Temporal, its UI, SeaweedFS), the schema and namespace jobs,
// and building deploy/Dockerfile; see docs/OPERATIONS.md ("Testing the
// deployment").
package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sandbot/sandbot/config"
)

// secrets are values for the variables docker-compose.yml requires (${X:?});
// .env.example leaves them empty on purpose.
var secrets = map[string]string{
	"SANDBOT_DECISION_KEY": "test-decision-key-0123456789abcdef0123456789",
	"POSTGRES_PASSWORD":    "test-postgres-password",
	"S3_ACCESS_KEY_ID":     "test-access-key",
	"S3_SECRET_ACCESS_KEY": "test-secret-key",
}

// The services of docker-compose.yml and what they are.
var (
	sandbotServices = []string{"worker", "worker-docker", "bot"}
	workerServices  = []string{"worker", "worker-docker"}
	oneShots        = []string{"temporal-schema", "temporal-namespace", "sandbox-image"}
	allServices     = []string{"postgres", "temporal-schema", "temporal", "temporal-namespace", "temporal-ui",
		"seaweedfs", "worker", "worker-docker", "sandbox-image", "bot"}
	dockerProfile = []string{"worker-docker", "sandbox-image"}
)

// notPassed are the variables a service's process reads that the compose
// file does not give it, and why. Every other variable its role reads must
// be in its environment, so a new setting cannot be forgotten here.
var notPassed = map[string]map[string]string{
	"worker": {
		"SANDBOT_SANDBOX_HOST_ID":     "each replica takes its container hostname; a shared value would merge them into one host",
		"SANDBOT_SANDBOX_SINGLE_HOST": "never true with more than one worker replica",
		"SANDBOT_SANDBOX_LOCAL_ROOT":  "fixed by the worker image",
		"SANDBOT_DEV_DATA_DIR":        "fixed by the worker image",
		"SANDBOT_DOCKER_*":            "this worker serves the local backend only",
	},
	"worker-docker": {
		"SANDBOT_SANDBOX_HOST_ID":          "each replica takes its container hostname",
		"SANDBOT_SANDBOX_SINGLE_HOST":      "never true with more than one worker",
		"SANDBOT_SANDBOX_LOCAL_ROOT":       "this worker serves the docker backend only",
		"SANDBOT_SANDBOX_LOCAL_NETWORK":    "this worker serves the docker backend only",
		"SANDBOT_SANDBOX_LOCAL_UNCONFINED": "this worker serves the docker backend only",
		"SANDBOT_DEV_DATA_DIR":             "fixed by the worker image",
	},
	"bot": {},
}

// otherEnv are the non-sandbot variables a sandbot service may get.
var otherEnv = map[string][]string{
	"worker":        {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"},
	"worker-docker": {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"},
	"bot":           nil,
}

func TestComposeFile(t *testing.T) {
	t.Parallel()
	for _, c := range composes(t) {
		t.Run(c.String(), func(t *testing.T) {
			p := load(t, c, []string{"docker-compose.yml"}, "--profile", "docker")
			checkProject(t, p)
			if c.v2 {
				// Compose v2 leaves out the services of inactive profiles.
				def := load(t, c, []string{"docker-compose.yml"})
				for _, name := range dockerProfile {
					if _, ok := def.Services[name]; ok {
						t.Errorf("%s runs without --profile docker", name)
					}
				}
			}
		})
	}
}

// TestComposeNeedsSecrets: the required variables stop Compose with a
// message naming them, rather than starting with an empty secret.
func TestComposeNeedsSecrets(t *testing.T) {
	t.Parallel()
	for _, c := range composes(t) {
		t.Run(c.String(), func(t *testing.T) {
			for name := range secrets {
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					env := maps.Clone(secrets)
					delete(env, name)
					out, err := c.config(t, []string{"docker-compose.yml"}, env)
					if err == nil {
						t.Fatalf("config succeeds without %s", name)
					}
					if !strings.Contains(out, name) {
						t.Errorf("config without %s fails without naming it:\n%s", name, out)
					}
				})
			}
		})
	}
}

// TestComposeTestOverride: deploy/compose.test.yml validates on top of the
// user-facing file and changes only how the sandbot images are built.
func TestComposeTestOverride(t *testing.T) {
	t.Parallel()
	for _, c := range composes(t) {
		t.Run(c.String(), func(t *testing.T) {
			base := load(t, c, []string{"docker-compose.yml"}, "--profile", "docker")
			over := load(t, c, []string{"docker-compose.yml", "deploy/compose.test.yml"}, "--profile", "docker")
			targets := stages(t, "deploy/test/Dockerfile")
			for _, name := range allServices {
				b, o := base.Services[name], over.Services[name]
				if b.Build == nil {
					if o.Image != b.Image {
						t.Errorf("%s: the override changes the image %s to %s", name, b.Image, o.Image)
					}
					continue
				}
				if !strings.HasPrefix(o.Image, "sandbot-test/") {
					t.Errorf("%s: the override's image %q is not a sandbot-test/ image", name, o.Image)
				}
				if o.Build == nil || !strings.HasSuffix(filepath.ToSlash(o.Build.Context), "deploy/test") {
					t.Errorf("%s: the override does not build from deploy/test: %+v", name, o.Build)
				} else if o.Build.Target != b.Build.Target || !targets[o.Build.Target] {
					t.Errorf("%s: the override builds target %q (the file: %q; deploy/test/Dockerfile has %v)", name, o.Build.Target, b.Build.Target, targets)
				}
				checkEqual(t, name+" security_opt", sorted(b.SecurityOpt), sorted(o.SecurityOpt))
				checkEqual(t, name+" healthcheck", b.Healthcheck, o.Healthcheck)
			}
			if got := over.Services["worker-docker"].Environment["SANDBOT_DOCKER_IMAGE"]; got != over.Services["sandbox-image"].Image {
				t.Errorf("worker-docker's SANDBOT_DOCKER_IMAGE is %q, sandbox-image builds %q", got, over.Services["sandbox-image"].Image)
			}
		})
	}
}

func checkProject(t *testing.T, p project) {
	t.Helper()
	for _, name := range allServices {
		if _, ok := p.Services[name]; !ok {
			t.Errorf("no service %s", name)
		}
	}
	root := moduleRoot(t)
	targets := stages(t, "deploy/Dockerfile")
	for name, s := range p.Services {
		if !slices.Contains(allServices, name) {
			t.Errorf("service %s is not known to this test; add it", name)
		}
		if s.ContainerName != "" {
			t.Errorf("%s: container_name %q stops it from scaling", name, s.ContainerName)
		}
		checkImage(t, name, s, targets)
		checkHealth(t, name, s, p)
		checkVolumes(t, name, s, p, root)
		if inProfile := slices.Contains(s.Profiles, "docker"); inProfile != slices.Contains(dockerProfile, name) {
			t.Errorf("%s: profiles %v", name, s.Profiles)
		}
		for depName, d := range s.DependsOn {
			want := "service_healthy"
			if p.Services[depName].Restart == "no" {
				want = "service_completed_successfully"
			}
			if d.Condition != want {
				t.Errorf("%s: depends on a service with condition %q; want %s", name, d.Condition, want)
			}
		}
	}

	// Data stays in named volumes, and the stores are not on a network that
	// leads out.
	for _, v := range []string{"postgres", "seaweedfs"} {
		if _, ok := p.Volumes[v]; !ok {
			t.Errorf("no named volume %s", v)
		}
	}
	checkMount(t, p, "postgres", "postgres", "/var/lib/postgresql")
	checkMount(t, p, "seaweedfs", "seaweedfs", "/data")
	for _, name := range []string{"postgres", "seaweedfs", "temporal", "temporal-schema"} {
		for n := range p.Services[name].Networks {
			if !p.Networks[n].Internal {
				t.Errorf("%s is on network %s, which is not internal", name, n)
			}
		}
	}
	// A gRPC client on internal networks only cannot resolve the frontend's
	// name in time (Docker's DNS forwards its TXT lookup nowhere), so every
	// client of the frontend is on a network that leads out too.
	for _, name := range []string{"temporal-namespace", "temporal-ui", "worker", "worker-docker", "bot"} {
		out := false
		for n := range p.Services[name].Networks {
			out = out || !p.Networks[n].Internal
		}
		if !out {
			t.Errorf("%s is on internal networks only: it cannot dial temporal:7233 by name", name)
		}
	}

	// Replicas: two workers, each its own host.
	w := p.Services["worker"]
	if n := w.replicas(); n < 2 {
		t.Errorf("worker: %d replicas; want 2", n)
	}

	checkSandbotEnv(t, p)

	// The local backend's confinement needs these, and nothing more.
	for _, opt := range []string{"seccomp=unconfined", "systempaths=unconfined", "no-new-privileges:true"} {
		if !slices.Contains(w.SecurityOpt, opt) {
			t.Errorf("worker: security_opt %v lacks %s (bubblewrap needs it; see docs/OPERATIONS.md)", w.SecurityOpt, opt)
		}
	}
	for _, name := range sandbotServices {
		s := p.Services[name]
		if !slices.Contains(s.CapDrop, "ALL") {
			t.Errorf("%s: cap_drop %v; want ALL", name, s.CapDrop)
		}
		if !slices.Contains(s.SecurityOpt, "no-new-privileges:true") {
			t.Errorf("%s: security_opt %v lacks no-new-privileges", name, s.SecurityOpt)
		}
		if s.Privileged {
			t.Errorf("%s is privileged", name)
		}
	}
}

func checkImage(t *testing.T, name string, s service, targets map[string]bool) {
	t.Helper()
	// The tag follows the last colon after the last slash (a registry
	// host may carry a port).
	repo, tag, ok := s.Image, "", false
	if i := strings.LastIndex(s.Image, ":"); i > strings.LastIndex(s.Image, "/") {
		repo, tag, ok = s.Image[:i], s.Image[i+1:], true
	}
	switch {
	case s.Image == "":
		t.Errorf("%s: no image", name)
	case !ok || tag == "" || tag == "latest" || strings.Contains(s.Image, ":latest"):
		t.Errorf("%s: image %q has no explicit tag", name, s.Image)
	case s.Build == nil && !pinned.MatchString(tag):
		t.Errorf("%s: image %s is not pinned to a version (tag %q)", name, repo, tag)
	case s.Build != nil && !targets[s.Build.Target]:
		t.Errorf("%s: builds target %q, which deploy/Dockerfile lacks (it has %v)", name, s.Build.Target, targets)
	case s.Build != nil && s.PullPolicy != "build":
		// Otherwise `docker compose pull` (or up) would fetch whatever a
		// registry serves under that name, with the deployment's secrets.
		t.Errorf("%s: built here but pull_policy is %q; want build", name, s.PullPolicy)
	}
}

// pinned is a version tag: digits first (1.32.1, 18.7-trixie, 4.44).
var pinned = regexp.MustCompile(`^[0-9]+(\.[0-9]+)+([-_][A-Za-z0-9.]+)*(@sha256:[0-9a-f]{64})?$`)

func checkHealth(t *testing.T, name string, s service, p project) {
	t.Helper()
	if slices.Contains(oneShots, name) {
		if s.Restart != "no" {
			t.Errorf("%s: a one-shot job with restart %q", name, s.Restart)
		}
		awaited := false
		for _, o := range p.Services {
			if d, ok := o.DependsOn[name]; ok && d.Condition == "service_completed_successfully" {
				awaited = true
			}
		}
		if !awaited {
			t.Errorf("%s: no service waits for this one-shot job to complete", name)
		}
		return
	}
	hc := s.Healthcheck
	if hc == nil || hc.Disable || len(hc.Test) == 0 || hc.Test[0] == "NONE" {
		t.Errorf("%s: no health check", name)
	}
	if s.Restart != "unless-stopped" && s.Restart != "always" {
		t.Errorf("%s: restart %q; a long-running service restarts", name, s.Restart)
	}
}

func checkVolumes(t *testing.T, name string, s service, p project, root string) {
	t.Helper()
	for _, m := range s.Volumes {
		switch m.Type {
		case "volume":
			if _, ok := p.Volumes[m.Source]; !ok {
				t.Errorf("%s: volume %q is not a named volume", name, m.Source)
			}
		case "bind":
			switch {
			case m.Target == "/var/run/docker.sock" && name == "worker-docker":
			case !strings.HasPrefix(m.Source, root+string(filepath.Separator)):
				t.Errorf("%s: binds %s from outside the repository", name, m.Source)
			case !m.ReadOnly:
				t.Errorf("%s: binds %s read-write", name, m.Source)
			default:
				if _, err := os.Stat(m.Source); err != nil {
					t.Errorf("%s: binds a missing file: %v", name, err)
				}
			}
		default:
			t.Errorf("%s: mount of type %q", name, m.Type)
		}
	}
}

func checkMount(t *testing.T, p project, service, volume, target string) {
	t.Helper()
	for _, m := range p.Services[service].Volumes {
		if m.Type == "volume" && m.Source == volume && m.Target == target {
			return
		}
	}
	t.Errorf("%s: named volume %s is not mounted at %s (mounts: %+v)", service, volume, target, p.Services[service].Volumes)
}

// checkSandbotEnv: each sandbot process gets exactly the settings its role
// reads (secrets included: the bot has no model key, the workers no chat
// token), the shared ones agree, and the addresses lead to the services.
func checkSandbotEnv(t *testing.T, p project) {
	t.Helper()
	role := map[string]config.Role{"worker": config.RoleWorker, "worker-docker": config.RoleWorker, "bot": config.RoleBot}
	for _, name := range sandbotServices {
		env := p.Services[name].Environment
		for k := range env {
			if v, ok := config.Lookup(k); ok {
				if v.Readers&role[name] == 0 {
					t.Errorf("%s gets %s, which only the %s reads", name, k, v.Readers)
				}
				continue
			}
			if !slices.Contains(otherEnv[name], k) {
				t.Errorf("%s gets %s, which is no setting of it", name, k)
			}
		}
		for _, v := range config.Vars() {
			if v.Readers&role[name] == 0 {
				continue
			}
			_, has := env[v.Name]
			_, excluded := notPassed[name][v.Name]
			for pattern := range notPassed[name] {
				if prefix, ok := strings.CutSuffix(pattern, "*"); ok && strings.HasPrefix(v.Name, prefix) {
					excluded = true
				}
			}
			switch {
			case has && excluded:
				t.Errorf("%s gets %s, which it must not: %s", name, v.Name, notPassed[name][v.Name])
			case !has && !excluded:
				t.Errorf("%s does not get %s (%s); pass it or list it in notPassed with the reason", name, v.Name, v.Doc)
			}
		}
		if got := env["SANDBOT_METRICS_ADDR"]; got != ":9090" {
			t.Errorf("%s: SANDBOT_METRICS_ADDR %q; the health check probes :9090", name, got)
		}
	}
	for _, k := range []string{"SANDBOT_DECISION_KEY", "SANDBOT_TEMPORAL_ADDRESS", "SANDBOT_TEMPORAL_NAMESPACE", "SANDBOT_TEMPORAL_TASK_QUEUE", "SANDBOT_TEMPORAL_API_KEY"} {
		want := p.Services["bot"].Environment[k]
		for _, w := range workerServices {
			if got := p.Services[w].Environment[k]; got != want {
				t.Errorf("%s: %s is %q on the bot, %q on %s", k, k, want, got, w)
			}
		}
	}
	if got := p.Services["bot"].Environment["SANDBOT_DECISION_KEY"]; got != secrets["SANDBOT_DECISION_KEY"] {
		t.Errorf("the bot's SANDBOT_DECISION_KEY is %q, not the one set", got)
	}
	if got, want := p.Services["temporal-namespace"].Environment["NAMESPACE"], p.Services["bot"].Environment["SANDBOT_TEMPORAL_NAMESPACE"]; got != want {
		t.Errorf("temporal-namespace creates %q; sandbot uses %q", got, want)
	}
	addr := p.Services["bot"].Environment["SANDBOT_TEMPORAL_ADDRESS"]
	if host, _, _ := strings.Cut(addr, ":"); p.Services[host].Healthcheck == nil {
		t.Errorf("SANDBOT_TEMPORAL_ADDRESS %q is not the compose Temporal server", addr)
	}
	if got := p.Services["temporal-ui"].Environment["TEMPORAL_ADDRESS"]; got != addr {
		t.Errorf("the UI reaches Temporal at %q, sandbot at %q", got, addr)
	}

	// Snapshots go to the compose SeaweedFS bucket with its credentials.
	seaweed := p.Services["seaweedfs"]
	bucket := ""
	for _, a := range seaweed.Command {
		if b, ok := strings.CutPrefix(a, "-bucket="); ok {
			bucket = b
		}
	}
	for _, name := range workerServices {
		env := p.Services[name].Environment
		u, err := url.Parse(env["SANDBOT_SANDBOX_SNAPSHOT_URL"])
		if err != nil {
			t.Fatal(err)
		}
		ep, _ := url.Parse(u.Query().Get("endpoint"))
		if u.Scheme != "s3" || u.Host != bucket || u.Query().Get("use_path_style") != "true" || ep == nil || ep.Hostname() != "seaweedfs" {
			t.Errorf("%s: snapshot URL %s is not bucket %q of the seaweedfs service", name, u, bucket)
		}
		for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} {
			if env[k] == "" || env[k] != seaweed.Environment[k] {
				t.Errorf("%s: %s differs from the store's", name, k)
			}
		}
		if _, ok := p.Services[name].Networks["storage"]; !ok {
			t.Errorf("%s is not on the storage network", name)
		}
	}
	if got := p.Services["worker"].Environment["SANDBOT_SANDBOX_BACKENDS"]; got != "local" {
		t.Errorf("worker serves %q", got)
	}
	if got := p.Services["worker-docker"].Environment["SANDBOT_SANDBOX_BACKENDS"]; got != "docker" {
		t.Errorf("worker-docker serves %q", got)
	}
	if got, want := p.Services["worker-docker"].Environment["SANDBOT_DOCKER_IMAGE"], p.Services["sandbox-image"].Image; got != want {
		t.Errorf("worker-docker's SANDBOT_DOCKER_IMAGE is %q, sandbox-image builds %q", got, want)
	}
	for _, name := range []string{"bot", "temporal-ui"} {
		if _, ok := p.Services[name].Networks["storage"]; ok {
			t.Errorf("%s reaches the snapshot store", name)
		}
	}
}

// TestEnvExample: .env.example lists every setting of the registry and
// every variable docker-compose.yml reads, and nothing else.
func TestEnvExample(t *testing.T) {
	root := moduleRoot(t)
	listed := map[string]envLine{}
	f, err := os.Open(filepath.Join(root, ".env.example"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		m := envAssign.FindStringSubmatch(sc.Text())
		if m == nil {
			if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
				t.Errorf(".env.example:%d: not NAME=value: %q", n, line)
			}
			continue
		}
		if _, dup := listed[m[2]]; dup {
			t.Errorf(".env.example:%d: %s listed twice", n, m[2])
		}
		listed[m[2]] = envLine{line: n, commented: m[1] != "", value: m[3]}
	}
	for _, v := range config.Vars() {
		if _, ok := listed[v.Name]; !ok {
			t.Errorf(".env.example does not list %s (%s)", v.Name, v.Doc)
		}
	}
	compose, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	defaults := map[string]string{}
	for _, m := range interpolation.FindAllStringSubmatch(string(compose), -1) {
		if _, ok := listed[m[1]]; !ok {
			t.Errorf("docker-compose.yml reads %s, which .env.example does not list", m[1])
		}
		if m[2] == ":-" {
			defaults[m[1]] = m[3]
		}
	}
	for name, l := range listed {
		_, registered := config.Lookup(name)
		_, read := defaults[name]
		read = read || strings.Contains(string(compose), "${"+name)
		if !registered && !read && !composeOwn[name] {
			t.Errorf(".env.example:%d: %s is neither a setting nor read by docker-compose.yml", l.line, name)
		}
		// A commented example value shows the compose default; they agree.
		if def, ok := defaults[name]; ok && l.commented && l.value != "" && l.value != def {
			t.Errorf(".env.example:%d: shows %s=%s, but docker-compose.yml defaults it to %s", l.line, name, l.value, def)
		}
	}
}

// composeOwn are Compose's own variables that .env.example may show.
var composeOwn = map[string]bool{"COMPOSE_PROFILES": true, "COMPOSE_PROJECT_NAME": true}

type envLine struct {
	line      int
	commented bool
	value     string
}

var (
	envAssign     = regexp.MustCompile(`^(# )?([A-Z][A-Z0-9_]*)=(.*)$`)
	interpolation = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}`)
	sandbotName   = regexp.MustCompile(`\bSANDBOT_[A-Z0-9_]*[A-Z0-9]\b`)
)

// TestNamesAreRegistered: every SANDBOT_* name in the deployment files is a
// registered variable (config's own test covers only deploy/'s top level).
func TestNamesAreRegistered(t *testing.T) {
	root := moduleRoot(t)
	files := []string{"docker-compose.yml", ".env.example", ".dockerignore"}
	err := filepath.WalkDir(filepath.Join(root, "deploy"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "out" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(root, path)
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range files {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, n := range sandbotName.FindAllString(line, -1) {
				_, ok := config.Lookup(n)
				if _, other := config.OtherNames[n]; !ok && !other {
					t.Errorf("%s:%d: %s is not a registered variable", rel, i+1, n)
				}
			}
		}
	}
}

// TestDockerfiles: the targets docker-compose.yml builds exist, their base
// images are pinned, and the sandbot images do not run as root.
func TestDockerfiles(t *testing.T) {
	for _, file := range []string{"deploy/Dockerfile", "deploy/test/Dockerfile"} {
		users := finalUsers(t, file)
		for _, target := range []string{"bot", "worker", "worker-local", "sandbox"} {
			u, ok := users[target]
			switch {
			case !ok:
				t.Errorf("%s: no target %s", file, target)
			case u == "" || u == "root" || u == "0" || strings.HasPrefix(u, "0:") || strings.HasPrefix(u, "root:"):
				t.Errorf("%s: target %s runs as %q", file, target, u)
			}
		}
	}
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), "deploy/Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^ARG ([A-Z_]+_IMAGE)=(\S+)$`).FindAllStringSubmatch(string(b), -1) {
		_, tag, _ := strings.Cut(m[2], ":")
		if !pinned.MatchString(tag) {
			t.Errorf("deploy/Dockerfile: %s=%s is not pinned to a version", m[1], m[2])
		}
	}
}

// stages are the stage names of a Dockerfile.
func stages(t *testing.T, file string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for s := range finalUsers(t, file) {
		out[s] = true
	}
	return out
}

// finalUsers maps each stage of a Dockerfile to the USER it ends with (a
// stage FROM another inherits its user).
func finalUsers(t *testing.T, file string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), file))
	if err != nil {
		t.Fatal(err)
	}
	users := map[string]string{}
	stage := ""
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 4 && strings.EqualFold(f[0], "FROM") && strings.EqualFold(f[2], "AS"):
			stage = f[3]
			users[stage] = users[f[1]] // "" for an image: root
		case len(f) == 2 && strings.EqualFold(f[0], "USER") && stage != "":
			users[stage] = f[1]
		}
	}
	return users
}

// project is the part of `compose config` this test reads.
type project struct {
	Services map[string]service `yaml:"services"`
	Volumes  map[string]any     `yaml:"volumes"`
	Networks map[string]struct {
		Internal bool `yaml:"internal"`
	} `yaml:"networks"`
}

type service struct {
	Image      string `yaml:"image"`
	PullPolicy string `yaml:"pull_policy"`
	Build      *struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
		Target     string `yaml:"target"`
	} `yaml:"build"`
	Environment   env                  `yaml:"environment"`
	Command       []string             `yaml:"command"`
	Healthcheck   *healthcheck         `yaml:"healthcheck"`
	Restart       string               `yaml:"restart"`
	DependsOn     map[string]dependsOn `yaml:"depends_on"`
	Volumes       []mount              `yaml:"volumes"`
	SecurityOpt   []string             `yaml:"security_opt"`
	CapDrop       []string             `yaml:"cap_drop"`
	Privileged    bool                 `yaml:"privileged"`
	Profiles      []string             `yaml:"profiles"`
	ContainerName string               `yaml:"container_name"`
	Networks      map[string]any       `yaml:"networks"`
	Scale         *int                 `yaml:"scale"`
	Deploy        *struct {
		Replicas *int `yaml:"replicas"`
	} `yaml:"deploy"`
}

func (s service) replicas() int {
	switch {
	case s.Deploy != nil && s.Deploy.Replicas != nil:
		return *s.Deploy.Replicas
	case s.Scale != nil:
		return *s.Scale
	}
	return 1
}

type healthcheck struct {
	Test    []string `yaml:"test"`
	Disable bool     `yaml:"disable"`
}

type dependsOn struct {
	Condition string `yaml:"condition"`
}

// env is an environment mapping; Compose v2 writes unset values as null.
type env map[string]string

func (e *env) UnmarshalYAML(n *yaml.Node) error {
	m := map[string]*string{}
	if err := n.Decode(&m); err != nil {
		return err
	}
	*e = env{}
	for k, v := range m {
		if v != nil {
			(*e)[k] = *v
		} else {
			(*e)[k] = ""
		}
	}
	return nil
}

// mount is a service volume in either syntax: Compose v1 writes
// "source:target:mode", v2 a mapping.
type mount struct {
	Type     string `yaml:"type"`
	Source   string `yaml:"source"`
	Target   string `yaml:"target"`
	ReadOnly bool   `yaml:"read_only"`
}

func (m *mount) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.MappingNode {
		type plain mount
		return n.Decode((*plain)(m))
	}
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	parts := strings.Split(s, ":")
	if len(parts) < 2 {
		return errors.New("volume without a target: " + s)
	}
	m.Source, m.Target = parts[0], parts[1]
	m.ReadOnly = len(parts) > 2 && slices.Contains(strings.Split(parts[2], ","), "ro")
	m.Type = "volume"
	if strings.HasPrefix(m.Source, "/") || strings.HasPrefix(m.Source, ".") {
		m.Type = "bind"
	}
	return nil
}

// compose is one Compose implementation found on this machine.
type compose struct {
	argv []string
	v2   bool
}

func (c compose) String() string {
	if c.v2 {
		return "v2"
	}
	return "v1"
}

// composes are the Compose implementations on this machine: the docker
// compose plugin and/or docker-compose (v1 or a v2 binary). Without any,
// the test skips, except under CI=true, where it fails.
func composes(t *testing.T) []compose {
	t.Helper()
	found := findComposes()
	if len(found) == 0 {
		const why = "neither docker compose nor docker-compose is installed (apt-get install docker-compose, or the docker-compose-plugin)"
		if os.Getenv("CI") == "true" {
			t.Fatal(why + " (CI=true: the compose file must be validated)")
		}
		t.Skip(why + "; with CI=true this fails instead")
	}
	return found
}

var findComposes = sync.OnceValue(func() []compose {
	var out []compose
	seen := map[bool]bool{}
	try := func(argv ...string) {
		if _, err := exec.LookPath(argv[0]); err != nil {
			return
		}
		cmd := exec.Command(argv[0], append(argv[1:], "version", "--short")...)
		b, err := cmd.Output()
		if err != nil {
			return
		}
		v := strings.TrimPrefix(strings.TrimSpace(string(b)), "v")
		c := compose{argv: argv, v2: !strings.HasPrefix(v, "1.")}
		if !seen[c.v2] {
			seen[c.v2] = true
			out = append(out, c)
		}
	}
	try("docker", "compose")
	try("docker-compose")
	return out
})

// config runs `compose config` on files from the repository root, with
// .env.example as the environment file and env (plus PATH and what Docker's
// client needs) as the only environment, so neither a developer's .env nor
// their shell changes the result. It returns the output, stderr included
// when it fails.
func (c compose) config(t *testing.T, files []string, env map[string]string, flags ...string) (string, error) {
	t.Helper()
	root := moduleRoot(t)
	args := append([]string(nil), c.argv[1:]...)
	args = append(args, "--env-file", filepath.Join(root, ".env.example"))
	for _, f := range files {
		args = append(args, "-f", filepath.Join(root, f))
	}
	args = append(args, flags...)
	args = append(args, "config")
	cmd := exec.Command(c.argv[0], args...)
	cmd.Dir = root
	for _, k := range []string{"PATH", "HOME", "DOCKER_HOST", "DOCKER_CONFIG", "DOCKER_CONTEXT", "XDG_RUNTIME_DIR", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		return "", err
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return stdout.String() + stderr.String(), err
		}
		return stdout.String(), nil
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s config did not finish within a minute", c)
		return "", nil
	}
}

// load validates files with Compose and parses the normalized result. The
// results are shared by the tests (each Compose run costs about a second).
func load(t *testing.T, c compose, files []string, flags ...string) project {
	t.Helper()
	key := strings.Join(append(append([]string{c.String()}, files...), flags...), " ")
	loadMu.Lock()
	l, ok := loaded[key]
	if !ok {
		l = &loadResult{}
		loaded[key] = l
	}
	loadMu.Unlock()
	l.once.Do(func() {
		l.out, l.err = c.config(t, files, secrets, flags...)
		if l.err == nil {
			l.err = yaml.Unmarshal([]byte(l.out), &l.p)
		}
	})
	if l.err != nil {
		t.Fatalf("%s config %v %v: %v\n%s", c, files, flags, l.err, l.out)
	}
	return l.p
}

type loadResult struct {
	once sync.Once
	p    project
	out  string
	err  error
}

var (
	loadMu sync.Mutex
	loaded = map[string]*loadResult{}
)

func checkEqual(t *testing.T, what string, a, b any) {
	t.Helper()
	x, _ := yaml.Marshal(a)
	y, _ := yaml.Marshal(b)
	if !bytes.Equal(x, y) {
		t.Errorf("%s differs:\n%s\nvs\n%s", what, x, y)
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// moduleRoot is the repository root: go test runs in the package's
// directory, deploy/.
func moduleRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(wd)
}
