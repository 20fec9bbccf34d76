package integration

import (
	"strconv"
	"strings"
	"testing"

	"github.com/sandbot/sandbot/config"
	fakeopenai "github.com/sandbot/sandbot/internal/fake/openai"
	"github.com/sandbot/sandbot/sandbox"
)

// /status says how the sandbox confines commands; a sandbox that shares the
// host's network says so on its first card and in /status.
func TestStatusShowsConfinement(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(map[bool]string{false: "confined", true: "network-shared"}[shared], func(t *testing.T) { statusShowsConfinement(t, shared) })
	}
}

func statusShowsConfinement(t *testing.T, shared bool) {
	{
		s := newStack(t, func(c *config.Config) { c.Session.ApprovalMode = "never"; c.Sandbox.LocalNetwork = shared })
		th := s.thread("confinement-" + strconv.FormatBool(shared))
		s.model.Push(fakeopenai.ToolCallStep("c1", "shell", shell("echo hi")), fakeopenai.FinalStep("hi"))
		s.say(th, "ev-1", "say hi")
		end := s.waitState(th, "turn end", done)
		if got := hasNotice(end, sandbox.WarningNetwork); got != shared {
			t.Errorf("network shared %v: first card's notices %q", shared, end.Notices)
		}
		info := s.info(th)
		if !strings.HasPrefix(info.Confinement, "confined (bubblewrap)") || (info.SandboxWarning != "") != shared {
			t.Errorf("network shared %v: info %q, warning %q", shared, info.Confinement, info.SandboxWarning)
		}
		s.say(th, "ev-2", "/status")
		var status string
		s.poster.waitFor(t, "the /status reply", func(posts []posted, texts []string) bool {
			for _, p := range posts {
				for _, c := range p.Cards {
					if x := cardText(c); strings.Contains(x, "Sandbox") {
						status = x
					}
				}
			}
			for _, x := range texts {
				if strings.Contains(x, "Sandbox") {
					status = x
				}
			}
			return status != ""
		})
		if !strings.Contains(status, "confined (bubblewrap)") || strings.Contains(status, "⚠️") != shared {
			t.Errorf("network shared %v: /status reads %q", shared, status)
		}
	}
}
