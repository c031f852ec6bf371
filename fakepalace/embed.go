package fakepalace

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
	"regexp"
	"strings"
)

// Dim is the embedding width (all-MiniLM-L6-v2's, which the real default
// uses).
const Dim = 384

var wordRE = regexp.MustCompile(`[\pL\pN_]+`)

// Embed is a deterministic bag-of-words hash embedding, the trick upstream's
// own conftest.py uses: each word adds ±weight at a hashed coordinate, the
// vector is L2-normalised, distance is cosine. Two instances with the same
// embedder name give the same vector for the same text; a different name
// gives different vectors, so an embedder mismatch is observable.
func Embed(embedder, text string) []float64 {
	v := make([]float64, Dim)
	for _, w := range wordRE.FindAllString(strings.ToLower(text), -1) {
		sum := sha256.Sum256([]byte(embedder + "\x00" + w))
		i := binary.BigEndian.Uint32(sum[:4]) % Dim
		// Each model weighs words its own way: without this, any hash seed
		// gives the same cosine and a mismatch would be invisible.
		w := 0.5 + float64(binary.BigEndian.Uint16(sum[5:7]))/65535
		if sum[4]&1 == 0 {
			v[i] += w
		} else {
			v[i] -= w
		}
	}
	var n float64
	for _, x := range v {
		n += x * x
	}
	if n == 0 {
		return v
	}
	n = math.Sqrt(n)
	for i := range v {
		v[i] /= n
	}
	return v
}

// cosineDistance is 1 - cos(a, b) for normalised vectors (1 for a zero
// vector).
func cosineDistance(a, b []float64) float64 {
	var dot float64
	for i := range a {
		dot += a[i] * b[i]
	}
	return 1 - dot
}

func round(x float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(x*p) / p
}
