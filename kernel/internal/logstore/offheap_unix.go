//go:build unix

package logstore

import "syscall"

// mapOffHeap returns n zeroed bytes outside the Go heap (an anonymous
// private map: its pages are taken from the system only once written),
// and the function that gives them back, to be called once nothing
// refers to them.
func mapOffHeap(n int) ([]byte, func(), error) {
	mem, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, nil, err
	}
	return mem, func() { syscall.Munmap(mem) }, nil
}
