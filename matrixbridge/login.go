package matrixbridge

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"
)

// Login logs the bot's account in with its password (m.login.password)
// and returns the new device's access token, which the configuration's
// access_token_file holds. The account itself is made on the homeserver
// beforehand, as its operator makes accounts.
func Login(ctx context.Context, homeserver, userID, password string) (string, error) {
	if !isMatrixID(userID, '@') {
		return "", fmt.Errorf("user %q: a Matrix user id, @name:server", userID)
	}
	c, err := mautrix.NewClient(homeserver, "", "")
	if err != nil {
		return "", fmt.Errorf("homeserver: %w", err)
	}
	c.Log = zerolog.Nop()
	resp, err := c.Login(ctx, &mautrix.ReqLogin{
		Type:                     mautrix.AuthTypePassword,
		Identifier:               mautrix.UserIdentifier{Type: mautrix.IdentifierTypeUser, User: userID},
		Password:                 password,
		InitialDeviceDisplayName: "annal matrix",
	})
	if err != nil {
		return "", fmt.Errorf("logging %s in at %s: %w", userID, homeserver, err)
	}
	if resp.UserID != id.UserID(userID) {
		return "", fmt.Errorf("logged in as %s, not %s", resp.UserID, userID)
	}
	return resp.AccessToken, nil
}
