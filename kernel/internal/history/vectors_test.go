package history

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// historyIndexJSON is testvectors/historyindex.json, as far as this package
// reads it.
type historyIndexJSON struct {
	MetaBucket string `json:"meta_bucket"`
	FormatKey  string `json:"format_key"`
	Format     string `json:"format"`
	Bucket     string `json:"bucket"`
	BlockSize  uint64 `json:"block_size"`
	OldFormat  string `json:"old_format"`
	OldBucket  string `json:"old_bucket"`
	Vectors    []struct {
		Name    string   `json:"name"`
		Term    string   `json:"term"`
		Indices []string `json:"indices"`
		Blocks  []struct {
			Block    string `json:"block"`
			KeyHex   string `json:"key_hex"`
			ValueHex string `json:"value_hex"`
		} `json:"blocks"`
	} `json:"vectors"`
	KeyOrder []struct {
		Term  string `json:"term"`
		Block string `json:"block"`
	} `json:"key_order"`
	Readings []struct {
		Name     string   `json:"name"`
		Block    string   `json:"block"`
		ValueHex string   `json:"value_hex"`
		Indices  []string `json:"indices"`
	} `json:"readings"`
	Unions []struct {
		Name     string   `json:"name"`
		Block    string   `json:"block"`
		HeldHex  string   `json:"held_hex"`
		Add      []string `json:"add"`
		ValueHex string   `json:"value_hex"`
	} `json:"unions"`
	Migration struct {
		OldKeysHex []string `json:"old_keys_hex"`
		Blocks     []struct {
			KeyHex   string `json:"key_hex"`
			ValueHex string `json:"value_hex"`
		} `json:"blocks"`
	} `json:"migration"`
}

func loadHistoryIndexVectors(t *testing.T) historyIndexJSON {
	t.Helper()
	raw, err := os.ReadFile("../../../testvectors/historyindex.json")
	if err != nil {
		t.Fatal(err)
	}
	var f historyIndexJSON
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Vectors) == 0 || len(f.Readings) == 0 || len(f.Unions) == 0 || len(f.Migration.OldKeysHex) == 0 {
		t.Fatal("historyindex.json lacks vectors, readings, unions or a migration")
	}
	return f
}

// The package's names, keys, encoder and reader agree with the known
// answers in testvectors/historyindex.json, which testvectors checks
// against FORMATS.md: each vector's indices make its blocks' keys and
// values (through eachBlock, in the order the file gives), and each value
// reads back; each reading of a damaged value yields what the file says.
func TestVectors(t *testing.T) {
	f := loadHistoryIndexVectors(t)
	for _, c := range []struct{ name, got, want string }{
		{"meta bucket", string(bucketMeta), f.MetaBucket},
		{"format key", string(keyFormat), f.FormatKey},
		{"format", string(storeFormat), f.Format},
		{"bucket", string(bucketHistory), f.Bucket},
		{"old format", string(eventsFormat), f.OldFormat},
		{"old bucket", string(bucketEvents), f.OldBucket},
	} {
		if c.got != c.want {
			t.Errorf("the %s is %q, historyindex.json says %q", c.name, c.got, c.want)
		}
	}
	if indexBlock != f.BlockSize {
		t.Errorf("indexBlock is %d, historyindex.json says %d", indexBlock, f.BlockSize)
	}

	all := newPostings()
	for _, v := range f.Vectors {
		indices := decimals(t, v.Indices)
		p := newPostings()
		for _, i := range indices {
			p.add(i, [][]byte{[]byte(v.Term)})
			all.add(i, [][]byte{[]byte(v.Term)})
		}
		var got [][3]string // block, key, value
		err := p.eachBlock(func(key []byte, block uint64, in []uint64) error {
			value := encodeBlock(nil, block, in)
			if k := blockKey([]byte(v.Term), block); string(k) != string(key) {
				t.Errorf("%s: blockKey gives %x, eachBlock %x", v.Name, k, key)
			}
			if back := decodeBlock(nil, block, value); !slices.Equal(back, in) {
				t.Errorf("%s: block %d reads back as %v, not %v", v.Name, block, back, in)
			}
			got = append(got, [3]string{strconv.FormatUint(block, 10), hex.EncodeToString(key), hex.EncodeToString(value)})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var want [][3]string
		for _, b := range v.Blocks {
			want = append(want, [3]string{b.Block, b.KeyHex, b.ValueHex})
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: blocks (block, key, value) are\n%q\nhistoryindex.json says\n%q", v.Name, got, want)
		}
	}
	var order, want []string
	if err := all.eachBlock(func(key []byte, block uint64, _ []uint64) error {
		order = append(order, string(key[:len(key)-9])+" "+strconv.FormatUint(block, 10))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, k := range f.KeyOrder {
		want = append(want, k.Term+" "+k.Block)
	}
	if !slices.Equal(order, want) {
		t.Errorf("eachBlock puts the keys in the order\n%q\nhistoryindex.json says\n%q", order, want)
	}

	for _, r := range f.Readings {
		value, err := hex.DecodeString(r.ValueHex)
		if err != nil {
			t.Fatal(err)
		}
		got := decodeBlock(nil, decimal(t, r.Block), value)
		if want := decimals(t, r.Indices); !slices.Equal(got, want) {
			t.Errorf("reading %q: decodeBlock yields %v, historyindex.json says %v", r.Name, got, want)
		}
	}
}

// putBlock writes the union of what a block held, as read, and the
// indices added, as testvectors/historyindex.json's unions say; and an
// index of the events format moves into the blocks the file gives.
func TestVectors_UnionsAndMigration(t *testing.T) {
	f := loadHistoryIndexVectors(t)
	db, err := bolt.Open(filepath.Join(t.TempDir(), "state.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	for _, u := range f.Unions {
		held, err := hex.DecodeString(u.HeldHex)
		if err != nil {
			t.Fatal(err)
		}
		key := blockKey([]byte("aunion"), decimal(t, u.Block))
		var got []byte
		err = db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists(bucketHistory)
			if err != nil {
				return err
			}
			if err := b.Put(key, held); err != nil {
				return err
			}
			if err := putBlock(b, key, decimal(t, u.Block), decimals(t, u.Add)); err != nil {
				return err
			}
			got = slices.Clone(b.Get(key))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if hex.EncodeToString(got) != u.ValueHex {
			t.Errorf("union %q: putBlock leaves %x, historyindex.json says %s", u.Name, got, u.ValueHex)
		}
	}

	err = db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketHistory); err != nil {
			return err
		}
		meta, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		if err := meta.Put(keyFormat, eventsFormat); err != nil {
			return err
		}
		old, err := tx.CreateBucket(bucketEvents)
		if err != nil {
			return err
		}
		for _, k := range f.Migration.OldKeysHex {
			key, err := hex.DecodeString(k)
			if err != nil {
				return err
			}
			if err := old.Put(key, nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if db, err = migrateIndex(db, db.Path()); err != nil {
		t.Fatal(err)
	}
	var got, want [][2]string
	for _, b := range f.Migration.Blocks {
		want = append(want, [2]string{b.KeyHex, b.ValueHex})
	}
	err = db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketEvents) != nil || string(tx.Bucket(bucketMeta).Get(keyFormat)) != f.Format {
			t.Errorf("after the move the old bucket is left or the format is %q", tx.Bucket(bucketMeta).Get(keyFormat))
		}
		return tx.Bucket(bucketHistory).ForEach(func(k, v []byte) error {
			got = append(got, [2]string{hex.EncodeToString(k), hex.EncodeToString(v)})
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("the old index moves into\n%q\nhistoryindex.json says\n%q", got, want)
	}
}

func decimal(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func decimals(t *testing.T, s []string) []uint64 {
	t.Helper()
	out := make([]uint64, len(s))
	for i := range s {
		out[i] = decimal(t, s[i])
	}
	return out
}
