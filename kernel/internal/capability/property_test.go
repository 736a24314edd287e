package capability

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// targetsUpTo lists every target of 1 to depth segments drawn from words.
func targetsUpTo(words []string, depth int) []string {
	var all, level []string
	level = []string{""}
	for range depth {
		var next []string
		for _, prefix := range level {
			for _, w := range words {
				if prefix == "" {
					next = append(next, w)
				} else {
					next = append(next, prefix+"/"+w)
				}
			}
		}
		all = append(all, next...)
		level = next
	}
	return all
}

// matchSet returns, for each pattern, the set of targets it matches as a
// bit set over targets.
func matchSet(p Pattern, targets []string) []uint64 {
	set := make([]uint64, (len(targets)+63)/64)
	for i, target := range targets {
		if p.Match(target) {
			set[i/64] |= 1 << (i % 64)
		}
	}
	return set
}

// includedIn reports whether every target of child is in parent.
func includedIn(child, parent []uint64) bool {
	for i := range child {
		if child[i]&^parent[i] != 0 {
			return false
		}
	}
	return true
}

// randomPatterns draws n distinct patterns of 1 to 4 segments from segs.
func randomPatterns(rng *rand.Rand, segs []string, n int) []Pattern {
	seen := map[string]bool{}
	var out []Pattern
	for len(out) < n {
		s := randomPath(rng, segs, 4)
		if !seen[s] {
			seen[s] = true
			out = append(out, mustParsePattern(s))
		}
	}
	return out
}

// TestCovers_SoundBruteForce is the soundness property: whenever p covers c,
// every enumerated target c matches is matched by p. Where it does not,
// counterexample must show a target that separates them, which proves
// the "no" exact, character-level globs included.
func TestCovers_SoundBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 11))
	targets := targetsUpTo([]string{"a", "b", "ab", "x.json"}, 4)
	patterns := randomPatterns(rng, []string{"a", "b", "*", "a*", "*b", "**", "x.json", "*.json"}, 400)
	sets := make([][]uint64, len(patterns))
	for i, p := range patterns {
		sets[i] = matchSet(p, targets)
	}
	covered := 0
	for i, p := range patterns {
		for j, c := range patterns {
			r := decideCover(p, c, maxCoverStates)
			if r.gaveUp {
				t.Fatalf("decideCover(%q, %q) gave up", p, c)
			}
			if r.covered {
				covered++
				if !includedIn(sets[j], sets[i]) {
					t.Fatalf("UNSOUND: decideCover(%q, %q) but some target of %q is not matched by %q", p, c, c, p)
				}
				continue
			}
			target, found := counterexample(p, c)
			if !found || !c.Match(target) || p.Match(target) {
				t.Fatalf("decideCover(%q, %q) is false but counterexample gives %q, %v", p, c, target, found)
			}
		}
	}
	t.Logf("%d patterns, %d targets: %d of %d pairs covered", len(patterns), len(targets), covered, len(patterns)*len(patterns))
}

// TestCovers_ExactBruteForce is exactness at the segment level, checked
// against enumeration alone: for patterns of literal segments, "*" and "**",
// if every enumerated target of c is matched by p then p must cover c. The targets use the patterns' literals and "z", a segment no literal
// matches, up to 6 segments: enough for the shortest counterexample of
// patterns of at most 4 segments.
func TestCovers_ExactBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 3))
	targets := targetsUpTo([]string{"a", "b", "x.json", "z"}, 6)
	patterns := randomPatterns(rng, []string{"a", "b", "*", "**", "x.json"}, 300)
	sets := make([][]uint64, len(patterns))
	for i, p := range patterns {
		sets[i] = matchSet(p, targets)
	}
	for i, p := range patterns {
		for j, c := range patterns {
			included := includedIn(sets[j], sets[i])
			if got := patternCovers(p, c); got != included {
				t.Errorf("patternCovers(%q, %q) = %v, enumeration of %d targets says %v", p, c, got, len(targets), included)
			}
		}
	}
}

// TestCovers_RandomAgainstWitness decides inclusion on larger random
// patterns and checks both directions on paths derived from the child.
func TestCovers_RandomAgainstWitness(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	segs := []string{"a", "b", "*", "a*", "*b", "*a*", "**", "a*b", "ab"}
	for range 20000 {
		p := mustParsePattern(randomPath(rng, segs, 7))
		c := mustParsePattern(randomPath(rng, segs, 7))
		r := decideCover(p, c, maxCoverStates)
		if r.gaveUp {
			continue
		}
		if !r.covered {
			target, found := counterexample(p, c)
			if !found || !c.Match(target) || p.Match(target) {
				t.Fatalf("decideCover(%q, %q) is false but counterexample gives %q, %v", p, c, target, found)
			}
			continue
		}
		for _, target := range instances(rng, c, 20) {
			if c.Match(target) && !p.Match(target) {
				t.Fatalf("UNSOUND: decideCover(%q, %q) but %q matches the child only", p, c, target)
			}
		}
	}
}

// instances draws n targets that c matches (when it can): each "**" becomes
// 0 to 3 segments, each '*' a run of 0 to 2 characters. Segments left
// empty are dropped, so the caller checks that c matches what it gets.
func instances(rng *rand.Rand, c Pattern, n int) []string {
	fill := []string{"", "a", "b", "ab", "ba", "c"}
	var out []string
	for range n {
		var parts []string
		for _, seg := range strings.Split(c.String(), "/") {
			if seg == "**" {
				for range rng.IntN(4) {
					parts = append(parts, fill[1+rng.IntN(len(fill)-1)])
				}
				continue
			}
			var b strings.Builder
			for _, r := range seg {
				if r == '*' {
					b.WriteString(fill[rng.IntN(len(fill))])
					continue
				}
				b.WriteRune(r)
			}
			parts = append(parts, b.String())
		}
		parts = slices.DeleteFunc(parts, func(s string) bool { return s == "" })
		if len(parts) > 0 {
			out = append(out, strings.Join(parts, "/"))
		}
	}
	return out
}
