package matrixbridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/annal-dev/annal/api"
	"github.com/annal-dev/annal/client"
	"github.com/annal-dev/annal/internal/inert"
)

// maxMatrixResponse bounds an answer of the homeserver (mautrix's default
// is 512 MiB); a sync of one room with at most 50 new events is far less.
const maxMatrixResponse = 16 << 20

// Options are what New needs besides the configuration.
type Options struct {
	// Watch is the bridge's own client: a human's credential, used only to
	// read pending holds and the log's health.
	Watch *client.Client
	// NewClient makes the client that acts with a mapped human's
	// credential (the same server as Watch).
	NewClient func(credential string) (*client.Client, error)
	Logger    *slog.Logger
}

// human is an Annal human a Matrix user is mapped to, and the client that
// carries their credential.
type human struct {
	actor  api.Actor
	client *client.Client
}

// Bridge is a running Matrix bot in front of one annald.
type Bridge struct {
	cfg           *Config
	mx            *mautrix.Client
	room          id.RoomID
	watch         *client.Client
	humans        map[id.UserID]*human
	logger        *slog.Logger
	poll, alertEv time.Duration
	confirmWithin time.Duration
	now           func() time.Time

	mu       sync.Mutex
	posted   map[string]id.EventID // hold id → its post
	byPost   map[id.EventID]string // a post → its hold id
	answered map[string]bool       // holds answered through the room
	confirms map[string]*confirmation
	alerts   alertState
	ready    chan struct{}
}

// New checks the configuration against annald and the homeserver: every
// mapped credential MUST be a human's, and so MUST the bridge's own; the
// bot's access token MUST be the configured user's.
func New(ctx context.Context, cfg *Config, opts Options) (*Bridge, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	b := &Bridge{cfg: cfg, room: id.RoomID(cfg.Room), watch: opts.Watch, humans: map[id.UserID]*human{}, logger: opts.Logger,
		poll: cfg.duration(cfg.PollInterval, DefaultPollInterval), alertEv: cfg.duration(cfg.AlertInterval, DefaultAlertInterval),
		confirmWithin: cfg.duration(cfg.ConfirmWithin, DefaultConfirmWithin), now: time.Now,
		posted: map[string]id.EventID{}, byPost: map[id.EventID]string{}, answered: map[string]bool{},
		confirms: map[string]*confirmation{}, ready: make(chan struct{})}
	me, err := opts.Watch.WhoAmI(ctx)
	if err != nil {
		return nil, fmt.Errorf("the bridge's own credential: %w", err)
	}
	if me.Kind != "human" {
		return nil, fmt.Errorf("the bridge's own credential is %s's, of kind %s: it must be a human's, who may see the holds", me.ID, me.Kind)
	}
	for _, u := range cfg.sortedUsers() {
		h, err := mapHuman(ctx, cfg, u, opts.NewClient)
		if err != nil {
			return nil, err
		}
		b.humans[id.UserID(u)] = h
	}
	token, err := readSecret(cfg.path(cfg.AccessTokenFile))
	if err != nil {
		return nil, fmt.Errorf("access_token_file: %w", err)
	}
	if b.mx, err = mautrix.NewClient(cfg.Homeserver, id.UserID(cfg.UserID), token); err != nil {
		return nil, fmt.Errorf("homeserver: %w", err)
	}
	b.mx.Log = zerolog.Nop()
	b.mx.ResponseSizeLimit = maxMatrixResponse
	who, err := b.mx.Whoami(ctx)
	if err != nil {
		return nil, fmt.Errorf("homeserver %s: the bot's access token: %w", cfg.Homeserver, err)
	}
	if who.UserID != id.UserID(cfg.UserID) {
		return nil, fmt.Errorf("the access token is %s's, not user_id %s's", who.UserID, cfg.UserID)
	}
	return b, nil
}

func mapHuman(ctx context.Context, cfg *Config, user string, newClient func(string) (*client.Client, error)) (*human, error) {
	cred, err := readSecret(cfg.path(cfg.Users[user].CredentialFile))
	if err != nil {
		return nil, fmt.Errorf("users: %s: %w", user, err)
	}
	c, err := newClient(cred)
	if err != nil {
		return nil, err
	}
	a, err := c.WhoAmI(ctx)
	if err != nil {
		return nil, fmt.Errorf("users: %s: its credential: %w", user, err)
	}
	if a.Kind != "human" {
		return nil, fmt.Errorf("users: %s is mapped to %s, of kind %s: only humans answer holds and control agents", user, a.ID, a.Kind)
	}
	return &human{actor: *a, client: c}, nil
}

// Run joins the room, reads its messages and posts holds and alerts until
// ctx ends. It returns ctx's error, or the error that stopped the sync,
// once no command is being carried out any more. Run is called once.
func (b *Bridge) Run(ctx context.Context) error {
	if _, err := b.mx.JoinRoomByID(ctx, b.room); err != nil {
		return fmt.Errorf("joining %s (invite %s to it first): %w", b.room, b.cfg.UserID, err)
	}
	syncer := mautrix.NewDefaultSyncer()
	// The first sync holds the room's past: none of it is read, so that a
	// command sent while the bridge was down is never carried out late.
	syncer.OnSync(func(ctx context.Context, resp *mautrix.RespSync, since string) bool {
		if since == "" {
			b.markReady()
			return false
		}
		return b.mx.DontProcessOldEvents(ctx, resp, since)
	})
	// Only the configured room is synced: the bot may sit in others, and a
	// sync answer stays small. Its answers are bounded (maxMatrixResponse).
	syncer.FilterJSON = &mautrix.Filter{Room: &mautrix.RoomFilter{Rooms: []id.RoomID{b.room}, Timeline: &mautrix.FilterPart{Limit: 50}}}
	syncer.OnEventType(event.EventMessage, b.onMessage)
	b.mx.Syncer = syncer
	b.mx.Store = mautrix.NewMemorySyncStore()

	ctx, cancel := context.WithCancel(ctx)
	syncErr, syncDone := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(syncDone)
		syncErr <- b.mx.SyncWithContext(ctx)
	}()
	defer func() {
		cancel()
		<-syncDone // the command it was carrying out, if any, is done
	}()
	select {
	case <-b.ready:
	case err := <-syncErr:
		return fmt.Errorf("sync with %s: %w", b.cfg.Homeserver, err)
	case <-ctx.Done():
		return ctx.Err()
	}
	b.say(ctx, "", fmt.Sprintf("Annal bridge started (Matrix users mapped to Annal humans: %d). !help lists the commands.", len(b.humans)))
	b.logger.Info("matrix bridge started", "room", b.room, "mapped", len(b.humans))
	return b.watchLoop(ctx, syncErr)
}

func (b *Bridge) markReady() {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.ready:
	default:
		close(b.ready)
	}
}

func (b *Bridge) watchLoop(ctx context.Context, syncErr <-chan error) error {
	holds := time.NewTicker(b.poll)
	defer holds.Stop()
	alerts := time.NewTicker(b.alertEv)
	defer alerts.Stop()
	b.checkHolds(ctx)
	b.checkHealth(ctx)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-syncErr:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("sync with %s: %w", b.cfg.Homeserver, err)
		case <-holds.C:
			b.checkHolds(ctx)
			b.expireConfirmations()
		case <-alerts.C:
			b.checkHealth(ctx)
		}
	}
}

// onMessage reads a text message of the room as a command and answers it
// in a reply.
func (b *Bridge) onMessage(ctx context.Context, evt *event.Event) {
	if evt.RoomID != b.room || evt.Sender == b.mx.UserID {
		return
	}
	content := evt.Content.AsMessage()
	if content == nil || content.MsgType != event.MsgText {
		return // notices are other bots'; media are no commands
	}
	rel := content.RelatesTo
	if rel != nil && rel.Type == event.RelReplace {
		return // an edit: the command was read as first sent
	}
	replyHold := ""
	if rel != nil && rel.InReplyTo != nil {
		replyHold = b.holdOfPost(rel.InReplyTo.EventID)
	}
	cmd, err := ParseCommand(content.Body, replyHold)
	if cmd == nil && err == nil {
		return
	}
	var answer string
	if err != nil {
		answer = err.Error()
	} else {
		answer = b.execute(ctx, evt.Sender, cmd)
	}
	b.say(ctx, evt.ID, answer)
}

// execute carries out a command for sender and says what came of it.
func (b *Bridge) execute(ctx context.Context, sender id.UserID, cmd *Command) string {
	if cmd.Verb == "help" {
		return helpText
	}
	h := b.humans[sender]
	if h == nil {
		b.logger.Warn("matrix bridge: a command from an unmapped user refused", "user", sender, "command", cmd.Verb)
		return fmt.Sprintf("Refused: %s is not mapped to an Annal human in this bridge's configuration, so it may not !%s. Nothing was done.", sender, cmd.Verb)
	}
	switch cmd.Verb {
	case "dashboard":
		return b.dashboard(ctx, h)
	case "holds":
		return b.listHolds(ctx, h)
	case "approve", "reject":
		return b.answerHold(ctx, h, cmd)
	case "history":
		return b.history(ctx, h, cmd)
	case "status":
		return b.status(ctx, h, cmd.Agent)
	case "confirm":
		return b.confirm(ctx, sender, h, cmd.Code)
	}
	return b.askConfirmation(sender, cmd) // freeze, stop, kill
}

// say posts a notice to the room, as a reply to replyTo when it is set.
// It returns the post's id ("" if it could not be posted).
func (b *Bridge) say(ctx context.Context, replyTo id.EventID, text string) id.EventID {
	content := &event.MessageEventContent{MsgType: event.MsgNotice, Body: text}
	if replyTo != "" {
		content.RelatesTo = &event.RelatesTo{InReplyTo: &event.InReplyTo{EventID: replyTo}}
	}
	resp, err := b.mx.SendMessageEvent(ctx, b.room, event.EventMessage, content)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			b.logger.Error("matrix bridge: a message could not be posted", "room", b.room, "err", err)
		}
		return ""
	}
	return resp.EventID
}

// who names a human as the room reads it: name (id).
func who(a api.Actor) string {
	if a.Name == "" {
		return a.ID
	}
	return inert.Text(a.Name) + " (" + a.ID + ")"
}

// failure says why annald refused, in one line.
func failure(err error) string {
	var e *client.Error
	if errors.As(err, &e) {
		return inert.Text(strings.TrimSpace(e.Message))
	}
	return inert.Text(err.Error())
}
