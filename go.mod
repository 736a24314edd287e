module github.com/annal-dev/annal

go 1.26.8

require (
	github.com/gowebpki/jcs v1.0.2
	github.com/transparency-dev/merkle v0.0.2
	golang.org/x/mod v0.42.0
)
