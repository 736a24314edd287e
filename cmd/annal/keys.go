package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/mod/sumdb/note"

	"github.com/annal-dev/annal/api"
)

func keysCommand(g *globalFlags) *cobra.Command {
	keys := &cobra.Command{
		Use:   "keys",
		Short: "Signing keys: make one, register it for an actor, rotate or revoke it",
		Long: `An actor with a signing key signs its requests (--signing-key FILE or
ANNAL_SIGNING_KEY_FILE): every event they lead to carries the signature, which
the kernel checks against the key the log registered and an auditor checks
again offline (annal-verify bundle, --require-signed). Then not even the
kernel can log an action the actor did not ask for.`,
	}
	var name string
	generate := &cobra.Command{
		Use:   "generate FILE",
		Short: "Make an Ed25519 signing key: the private key into FILE (mode 0600), the verifier key on stdout",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			skey, vkey, err := note.GenerateKey(rand.Reader, name)
			if err != nil {
				return err
			}
			f, err := os.OpenFile(args[0], os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return fmt.Errorf("signing key file: %w (it is never overwritten)", err)
			}
			if _, err := f.WriteString(skey + "\n"); err != nil {
				f.Close()
				return err
			}
			if err := f.Sync(); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			if err := os.WriteFile(strings.TrimSuffix(args[0], filepath.Ext(args[0]))+".pub", []byte(vkey+"\n"), 0o644); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), vkey)
			return nil
		},
	}
	generate.Flags().StringVar(&name, "name", "annal-signing-key", "the key's name (any name: the log binds the key to its actor)")
	var require bool
	var reason string
	set := &cobra.Command{
		Use:   "set ACTOR (VERIFIER-KEY | @FILE | --revoke)",
		Short: "Register or rotate ACTOR's signing key (the actor itself signs with its current key; or root, or its creator)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			revoke, _ := cmd.Flags().GetBool("revoke")
			var key string
			switch {
			case revoke && len(args) == 1:
			case !revoke && len(args) == 2:
				key = args[1]
				if file, ok := strings.CutPrefix(key, "@"); ok {
					raw, err := os.ReadFile(file)
					if err != nil {
						return err
					}
					key = strings.TrimSpace(string(raw))
				}
			default:
				return errors.New("give a verifier key, or --revoke")
			}
			c, err := g.client(true)
			if err != nil {
				return err
			}
			ctx, cancel := g.context(cmd)
			defer cancel()
			rc, err := c.SetSigningKey(ctx, args[0], api.SigningKeyRequest{Key: key, RequireSigned: require, Reason: reason})
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), rc)
		},
	}
	set.Flags().Bool("revoke", false, "revoke the actor's signing key")
	set.Flags().BoolVar(&require, "require-signed", false, "from now on, every request of the actor must be signed")
	set.Flags().StringVar(&reason, "reason", "", "why, for the log")
	keys.AddCommand(generate, set)
	return keys
}
