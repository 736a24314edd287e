//go:build !unix

package logstore

import "errors"

// mapOffHeap has no anonymous maps to use here: the resident proofs keep
// nothing (residentStore), rather than 92 MiB in the Go heap.
func mapOffHeap(int) ([]byte, func(), error) {
	return nil, nil, errors.New("no anonymous memory maps on this system")
}
