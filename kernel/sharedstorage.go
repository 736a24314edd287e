package kernel

import (
	"context"

	"github.com/annal-dev/annal/internal/sharedstore"
	"github.com/annal-dev/annal/kernel/internal/logstore"
	"github.com/annal-dev/annal/kernel/internal/sealstore"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// A log on shared storage keeps what is not the log where every kernel
// instance reaches it too (internal/sharedstore): the sealed payloads and
// their keys here, the blobs and the console's sessions through Shared. A
// takeover, or another instance behind a load balancer, then opens every
// sealed payload, and an erasure on one instance holds for all.

// SharedKeyFile is the data folder's key-encryption key of a log on shared
// storage: copied to every instance with the log's identity.
const SharedKeyFile = sharedstore.KeyFile

// openSealed opens the sealed store of cfg's storage: the data folder's,
// or the shared one, into which it first moves what the data folder holds
// from before the log moved to shared storage.
func openSealed(cfg Config, dir *logstore.DataDir) (*sealstore.Store, *sharedstore.Store, error) {
	if cfg.Storage.OnDisk() {
		return sealstore.Open(dir.Path), nil, nil
	}
	shared, err := OpenShared(context.Background(), dir.Path, cfg.Storage.AWS)
	if err != nil {
		return nil, nil, err
	}
	sealed := sealstore.OpenShared(shared)
	n, err := sealed.MoveFrom(dir.Path)
	if n > 0 {
		cfg.Logger.Info("moved the data folder's sealed payloads to shared storage", "subjects", n)
	}
	if err != nil {
		shared.Close()
		return nil, nil, err
	}
	return sealed, shared, nil
}

// OpenShared opens the shared store of a log on a's database and bucket,
// with the key-encryption key of the data folder at dataDir (made on the
// log's first start there).
func OpenShared(ctx context.Context, dataDir string, a *AWSStorage) (*sharedstore.Store, error) {
	sdk, s3opts, err := a.S3Config(ctx)
	if err != nil {
		return nil, err
	}
	return sharedstore.Open(ctx, sharedstore.Config{DataDir: dataDir, DSN: a.DSN, S3: s3.NewFromConfig(sdk, s3opts), Bucket: a.Bucket})
}

// Shared is the shared store of a log on shared storage, for the blobs and
// the console's sessions; nil when the log is in the data folder.
func (k *Kernel) Shared() *sharedstore.Store { return k.shared }

// CheckSharedKey reports whether the data folder at dataDir holds the
// shared store's key the log's other instances use (or no instance has
// one yet), without making one: a standby runs it at start, so that a
// missing shared.key is said at once, not at the takeover.
func CheckSharedKey(ctx context.Context, dataDir string, a *AWSStorage) error {
	return sharedstore.Check(ctx, dataDir, a.DSN)
}
