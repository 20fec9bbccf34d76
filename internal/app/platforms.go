package app

import "context"

// platforms builds the runners of the enabled chat platforms.
func (b *Bot) platforms(ctx context.Context) ([]runner, error) {
	return nil, nil
}
