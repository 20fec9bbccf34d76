package workerapp

import (
	"strconv"
	"testing"

	"github.com/sandbot/sandbot/config"
	"github.com/sandbot/sandbot/sandbox/docker"
)

// TestDocumentedDockerDefaults: the registry documents the docker
// backend's defaults (config passes zero through), so it must say what the
// backend does.
func TestDocumentedDockerDefaults(t *testing.T) {
	want := map[string]string{
		"SANDBOT_DOCKER_IMAGE":      docker.DefaultImage,
		"SANDBOT_DOCKER_NETWORK":    docker.DefaultNetwork,
		"SANDBOT_DOCKER_USER":       docker.DefaultUser,
		"SANDBOT_DOCKER_WORKDIR":    docker.DefaultWorkdir,
		"SANDBOT_DOCKER_PIDS_LIMIT": strconv.Itoa(docker.DefaultPidsLimit),
		"SANDBOT_DOCKER_CPUS":       strconv.FormatFloat(docker.DefaultCPUs, 'g', -1, 64),
		"SANDBOT_DOCKER_MEMORY":     "1g",
	}
	if docker.DefaultMemory != 1<<30 {
		t.Errorf("docker's default memory is %d bytes; update the registry's 1g", docker.DefaultMemory)
	}
	for name, w := range want {
		v, ok := config.Lookup(name)
		if !ok {
			t.Fatalf("%s is not registered", name)
		}
		if v.Documented() != w {
			t.Errorf("%s documents %q, the backend's default is %q", name, v.Documented(), w)
		}
	}
}
