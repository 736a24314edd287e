package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/matrixbridge"
)

// matrixCommand runs the Matrix bridge (package matrixbridge): holds posted
// to a room and answered there by mapped humans, history, status, and
// confirmed freeze/stop/kill, witness alerts.
func matrixCommand(g *globalFlags) *cobra.Command {
	var configPath string
	var check bool
	cmd := &cobra.Command{
		Use:   "matrix --config FILE [--check]",
		Short: "Run the Matrix bridge: holds to a room, answered by its mapped humans; history, status, freeze/stop/kill, witness alerts",
		Long: `Run the Matrix bridge until interrupted. Your credential (--credential,
--credential-file) must be a human's: the bridge reads pending holds and the
log's health with it, and never acts with it. Each Matrix user of the
configuration's "users" acts with the credential of the Annal human it maps
to. --check checks the configuration, the credentials and the bot's access
token, and exits.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := matrixbridge.LoadConfig(configPath)
			if err != nil {
				return err
			}
			watch, err := g.client(true)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			startCtx, cancel := context.WithTimeout(ctx, g.timeout)
			defer cancel()
			b, err := matrixbridge.New(startCtx, cfg, matrixbridge.Options{
				Watch:     watch,
				NewClient: func(credential string) (*client.Client, error) { return g.clientWith(credential) },
				Logger:    slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)),
			})
			if err != nil {
				return err
			}
			if check {
				g.notef("annal: the Matrix bridge's configuration %s is good", configPath)
				return nil
			}
			if err := b.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&configPath, "config", "", "the bridge's configuration file (JSON; see the README)")
	cmd.Flags().BoolVar(&check, "check", false, "check the configuration, credentials and access token, then exit")
	_ = cmd.MarkFlagRequired("config")
	cmd.AddCommand(matrixLoginCommand(g))
	return cmd
}

// matrixLoginCommand logs the bot's Matrix account in and writes its access
// token to a file (mode 0600) for the configuration's access_token_file.
func matrixLoginCommand(g *globalFlags) *cobra.Command {
	var homeserver, user, passwordFile, out string
	cmd := &cobra.Command{
		Use:   "login --homeserver URL --user @NAME:SERVER --password-file FILE -o FILE",
		Short: "Log the bridge's Matrix account in; write its access token to a file",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			raw, err := os.ReadFile(passwordFile)
			if err != nil {
				return fmt.Errorf("password file: %w", err)
			}
			ctx, cancel := g.context(cmd)
			defer cancel()
			token, err := matrixbridge.Login(ctx, homeserver, user, strings.TrimRight(string(raw), "\r\n"))
			if err != nil {
				return err
			}
			if err := os.WriteFile(out, []byte(token+"\n"), 0o600); err != nil {
				return err
			}
			g.notef("annal: %s logged in; its access token is in %s", user, out)
			return nil
		},
	}
	cmd.Flags().StringVar(&homeserver, "homeserver", "", "the homeserver's client API URL")
	cmd.Flags().StringVar(&user, "user", "", "the bot's Matrix user id")
	cmd.Flags().StringVar(&passwordFile, "password-file", "", "a file holding the bot's password")
	cmd.Flags().StringVarP(&out, "output", "o", "", "where to write the access token")
	for _, f := range []string{"homeserver", "user", "password-file", "output"} {
		_ = cmd.MarkFlagRequired(f)
	}
	return cmd
}

// clientWith is a client like g.client's (server, retries) acting with
// another credential.
func (g *globalFlags) clientWith(credential string) (*client.Client, error) {
	c, err := client.New(g.server, credential)
	if err != nil {
		return nil, err
	}
	retry := client.DefaultRetry
	retry.Attempts = g.retries + 1
	retry.Notify = func(e *client.Error, attempt int, wait time.Duration) {
		g.notef("annal: %d %s; sending again in %v (%d of %d)", e.Status, e.Message, wait.Round(time.Millisecond), attempt, g.retries)
	}
	return c.WithRetry(retry), nil
}
