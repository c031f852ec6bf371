package realpalace

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/joakimp/devbox-config/fakepalace"
)

// EmbedModel is the model name MemPalace is told (it records the bare
// "openai-compat", never this) and the name the vectors are made under:
// the double's default embedder's, so a real palace and a fakepalace
// with default options give the same text the same vector, and their
// distances are comparable.
const EmbedModel = "minilm"

// Vector is the embedding the server answers for text under EmbedModel.
func Vector(text string) []float64 { return VectorOf(EmbedModel, text) }

// VectorOf is the embedding the server answers for text when MemPalace
// asks for model: the double's (fakepalace.Embed, a bag-of-words hash
// embedding; another model name gives other vectors), with a text that
// has no words mapped to a unit vector of its own (MemPalace normalises;
// a zero vector would be NaN).
func VectorOf(model, text string) []float64 {
	v := fakepalace.Embed(model, text)
	for _, x := range v {
		if x != 0 {
			return v
		}
	}
	v[0] = 1
	return v
}

// Embedder is an OpenAI-compatible embedding server on 127.0.0.1
// (POST /v1/embeddings) answering with VectorOf the model asked for: what MemPalace's
// openai-compat embedder calls instead of downloading a model.
type Embedder struct {
	// URL is the base MemPalace is given (it appends /v1/embeddings).
	URL string
	srv *http.Server
	ln  net.Listener
	// done is closed when the serving goroutine has returned.
	done chan struct{}
}

// StartEmbedder starts an embedding server; Close stops it.
func StartEmbedder() (*Embedder, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("embedder: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/embeddings", serveEmbeddings)
	e := &Embedder{URL: "http://" + ln.Addr().String(), ln: ln, done: make(chan struct{}),
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() {
		defer close(e.done)
		e.srv.Serve(ln) // always an error, ErrServerClosed after Close: nothing to report
	}()
	return e, nil
}

// Close stops the server and waits for it.
func (e *Embedder) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.srv.Shutdown(ctx); err != nil {
		e.srv.Close() // a client still holds a connection: cut it
	}
	<-e.done
}

// serveEmbeddings answers {"model", "input": str | [str], ...} with one
// row per input, index 0..n-1, plain float lists.
func serveEmbeddings(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model string          `json:"model"`
		Input json.RawMessage `json:"input"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<20)).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad request body"}}`, http.StatusBadRequest)
		return
	}
	var inputs []string
	if err := json.Unmarshal(req.Input, &inputs); err != nil {
		var one string
		if err := json.Unmarshal(req.Input, &one); err != nil {
			http.Error(w, `{"error":{"message":"input must be a string or a list of strings"}}`, http.StatusBadRequest)
			return
		}
		inputs = []string{one}
	}
	type row struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float64 `json:"embedding"`
	}
	if req.Model == "" {
		req.Model = EmbedModel
	}
	rows := make([]row, len(inputs))
	for i, in := range inputs {
		rows[i] = row{Object: "embedding", Index: i, Embedding: VectorOf(req.Model, in)}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"object": "list", "model": req.Model, "data": rows,
		"usage": map[string]int{"prompt_tokens": 0, "total_tokens": 0}})
}
