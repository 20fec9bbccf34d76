package fakeslack

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// maxViewStack is how many views a modal's stack holds: the root and two
// pushed onto it (Slack's documented limit).
const maxViewStack = 3

// viewsPushLocked serves views.push (JSON body): like views.open, but the
// trigger must come from a click inside an open modal, and the new view
// goes on that modal's stack.
func (s *Server) viewsPushLocked(req request, now time.Time) result {
	var in struct {
		TriggerID string          `json:"trigger_id"`
		View      json.RawMessage `json:"view"`
	}
	if err := json.Unmarshal(req.body, &in); err != nil {
		return errResult("invalid_json")
	}
	issued, known := s.trigs[in.TriggerID]
	if !known {
		return errResult("invalid_trigger_id")
	}
	if s.opts.TriggerTTL > 0 && now.Sub(issued) > s.opts.TriggerTTL {
		return errResult("expired_trigger_id")
	}
	under, inModal := s.vtrigs[in.TriggerID]
	if !inModal {
		// A trigger from a message click opens a modal; only one from a
		// click in a modal can push onto it.
		return errResultWith("invalid_trigger_id", []string{"views.push needs the trigger of an interaction inside an open modal"})
	}
	depth := 1
	for id := under; s.views[id] != nil && s.views[id].Previous != ""; id = s.views[id].Previous {
		depth++
	}
	if depth >= maxViewStack {
		return errResult("push_limit_reached")
	}
	delete(s.trigs, in.TriggerID)
	delete(s.vtrigs, in.TriggerID)
	v, inputs, errs := checkView(in.View)
	if len(errs) > 0 {
		return errResultWith("invalid_arguments", errs)
	}
	id := s.newIDLocked("V")
	s.views[id] = &openedView{
		View:   View{ID: id, TriggerID: in.TriggerID, CallbackID: v.CallbackID, PrivateMetadata: v.PrivateMetadata, Raw: in.View, Previous: under},
		inputs: inputs,
	}
	return okResult(map[string]any{"view": s.viewJSONLocked(s.views[id])})
}

// viewsUpdateLocked serves views.update (JSON body): the view named by
// view_id is replaced, if the hash (when given) is its current one.
func (s *Server) viewsUpdateLocked(req request) result {
	var in struct {
		ViewID     string          `json:"view_id"`
		ExternalID string          `json:"external_id"`
		Hash       string          `json:"hash"`
		View       json.RawMessage `json:"view"`
	}
	if err := json.Unmarshal(req.body, &in); err != nil {
		return errResult("invalid_json")
	}
	if in.ViewID == "" {
		return errResultWith("invalid_arguments", []string{"the fake knows views by view_id only"})
	}
	ov := s.views[in.ViewID]
	if ov == nil {
		return errResult("not_found")
	}
	if in.Hash != "" && in.Hash != viewHash(ov) {
		return errResult("hash_conflict")
	}
	v, inputs, errs := checkView(in.View)
	if len(errs) > 0 {
		return errResultWith("invalid_arguments", errs)
	}
	ov.CallbackID, ov.PrivateMetadata, ov.Raw, ov.inputs = v.CallbackID, v.PrivateMetadata, in.View, inputs
	ov.Updates++
	s.notifyLocked()
	return okResult(map[string]any{"view": s.viewJSONLocked(ov)})
}

func viewHash(v *openedView) string { return "h" + v.ID + "." + strconv.Itoa(v.Updates) }

// viewJSONLocked is a view as Slack returns it and puts in payloads.
func (s *Server) viewJSONLocked(v *openedView) map[string]any {
	view := map[string]any{}
	_ = json.Unmarshal(v.Raw, &view)
	view["id"], view["team_id"], view["app_id"], view["bot_id"] = v.ID, s.opts.TeamID, s.opts.AppID, s.opts.BotID
	view["hash"] = viewHash(v)
	view["previous_view_id"] = nil
	if v.Previous != "" {
		view["previous_view_id"] = v.Previous
	}
	view["root_view_id"] = v.ID
	for root := v; root != nil && root.Previous != ""; root = s.views[root.Previous] {
		view["root_view_id"] = root.Previous
	}
	view["state"] = map[string]any{"values": map[string]any{}}
	return view
}

// View returns the modal with id as last opened, pushed or updated.
func (s *Server) View(id string) (View, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.views[id]
	if !ok {
		return View{}, false
	}
	return v.View, true
}

// ViewButtons are the buttons of a modal's actions blocks.
func (v View) ViewButtons() []Button {
	var raw struct {
		Blocks json.RawMessage `json:"blocks"`
	}
	_ = json.Unmarshal(v.Raw, &raw)
	return Message{RawBlocks: string(raw.Blocks)}.Buttons()
}

// ClickInView builds a click with ClickInViewPayload and sends it over
// Socket Mode.
func (s *Server) ClickInView(ctx context.Context, viewID, user, actionID string, value *string) (string, error) {
	p, err := s.ClickInViewPayload(viewID, user, actionID, value)
	if err != nil {
		return "", err
	}
	return s.SendInteraction(ctx, p)
}

// ClickInViewPayload builds the block_actions payload Slack sends when
// user clicks the button actionID of an open modal (container type "view",
// no channel, the view with its private_metadata); its trigger may push a
// view onto that modal. value, when set, overrides the button's value (a
// forged or stale click).
func (s *Server) ClickInViewPayload(viewID, user, actionID string, value *string) (json.RawMessage, error) {
	if user == "" {
		user = "U0001"
	}
	s.mu.Lock()
	ov := s.views[viewID]
	if ov == nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("fakeslack: click in view: no view %q", viewID)
	}
	var btn *Button
	for _, b := range ov.ViewButtons() {
		if b.ActionID == actionID {
			b := b
			btn = &b
		}
	}
	if btn == nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("fakeslack: click in view: view %s has no button %q (buttons: %v)", viewID, actionID, ov.ViewButtons())
	}
	val := btn.Value
	if value != nil {
		val = *value
	}
	trigger := s.newTriggerLocked()
	if s.vtrigs == nil {
		s.vtrigs = map[string]string{}
	}
	s.vtrigs[trigger] = viewID
	p := map[string]any{
		"type": "block_actions", "user": s.userJSON(user), "api_app_id": s.opts.AppID, "token": verificationToken,
		"container": map[string]any{"type": "view", "view_id": viewID}, "trigger_id": trigger, "team": s.teamJSON(),
		"enterprise": nil, "is_enterprise_install": false, "view": s.viewJSONLocked(ov),
		"actions": []any{map[string]any{
			"type": "button", "action_id": btn.ActionID, "block_id": btn.BlockID, "value": val,
			"text": map[string]any{"type": "plain_text", "text": btn.Text, "emoji": true}, "action_ts": s.newTSLocked(),
		}},
	}
	s.mu.Unlock()
	return json.Marshal(p)
}

// ValidateView applies the fake's modal checks (what views.open, .push and
// .update refuse) to a view's JSON, for converter tests.
func ValidateView(raw []byte) []string {
	_, _, errs := checkView(raw)
	return errs
}
