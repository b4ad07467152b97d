"""Go snippets: a concurrent word count, config parsing, a health handler, a generic stack, retry."""

# Snippet code is source text kept verbatim; some of its lines are longer than the house limit.
# ruff: noqa: E501
from __future__ import annotations

from tools.promptgen.model import Bug, Snippet

GO: tuple[Snippet, ...] = (
    Snippet(
        "go_word_count", "go", "CountWords",
        "counts words across many files concurrently with a bounded worker pool",
        "Write a Go function `CountWords(paths []string, workers int) (map[string]int, error)` "
        "that reads the files concurrently with at most `workers` goroutines, splits contents "
        "with strings.Fields, lowercases words and merges the counts. Return the first read error "
        "(wrapped with the path) after all workers finish.",
        r'''package textstats

import (
	"fmt"
	"os"
	"strings"
	"sync"
)

// CountWords counts lowercase words across files using at most `workers` goroutines.
func CountWords(paths []string, workers int) (map[string]int, error) {
	if workers < 1 {
		workers = 1
	}
	jobs := make(chan string)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	totals := make(map[string]int)

	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for path := range jobs {
				data, err := os.ReadFile(path)
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = fmt.Errorf("read %s: %w", path, err)
					}
				} else {
					for _, word := range strings.Fields(string(data)) {
						totals[strings.ToLower(word)]++
					}
				}
				mu.Unlock()
			}
		}()
	}
	for _, path := range paths {
		jobs <- path
	}
	close(jobs)
	wg.Wait()
	return totals, firstErr
}
''',
        {"CountWords": ("WordCounts", "TallyWords", "CountTokens"), "workers": ("parallelism", "poolSize")},
        (Bug("	close(jobs)\n	wg.Wait()", "	wg.Wait()",
             "fatal error: all goroutines are asleep - deadlock!\n\ngoroutine 1 [semacquire]:\n"
             "sync.runtime_Semacquire(0xc000012148?)\n\t/usr/local/go/src/runtime/sema.go:62 +0x25\n"
             "sync.(*WaitGroup).Wait(0xc000012140)\n\t/usr/local/go/src/sync/waitgroup.go:116 +0x48\n"
             "example.com/textstats.CountWords({0xc00001e0c0, 0x2, 0x2}, 0x4)\n\t{file}:{line} +0x1d9\n"
             "FAIL\texample.com/textstats\t0.012s"),),
        (),
    ),
    Snippet(
        "go_parse_kv", "go", "ParseConfig",
        "parses key=value configuration text with comments and quoted values",
        "Write a Go function `ParseConfig(r io.Reader) (map[string]string, error)` that reads "
        "lines of `key = value`, ignores blank lines and lines starting with '#', trims spaces, "
        "strips one pair of surrounding double quotes from values, and returns an error naming the "
        "line number for a line without '=' or with an empty key. Later keys override earlier ones.",
        r'''package config

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// ParseConfig reads `key = value` lines; '#' starts a comment line.
func ParseConfig(r io.Reader) (map[string]string, error) {
	values := make(map[string]string)
	scanner := bufio.NewScanner(r)
	lineNo := 0
	for scanner.Scan() {
		lineNo++
		line := strings.TrimSpace(scanner.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, found := strings.Cut(line, "=")
		key = strings.TrimSpace(key)
		if !found || key == "" {
			return nil, fmt.Errorf("line %d: expected key = value, got %q", lineNo, line)
		}
		value = strings.TrimSpace(value)
		if len(value) >= 2 && strings.HasPrefix(value, "\"") && strings.HasSuffix(value, "\"") {
			value = value[1 : len(value)-1]
		}
		values[key] = value
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return values, nil
}
''',
        {"ParseConfig": ("ReadSettings", "LoadKV", "ParseEnvFile"), "values": ("settings", "entries")},
        (Bug("value = value[1 : len(value)-1]", "value = value[1:]",
             "--- FAIL: TestParseConfig/quoted_value (0.00s)\n"
             "    config_test.go:41: got name = \"demo\\\"\", want \"demo\"\nFAIL\n"
             "FAIL\texample.com/config\t0.004s"),),
        (("mustParse(\"a = 1\\n# c\\nb = \\\"x\\\"\\n\")[\"b\"]", "\"x\""),),
    ),
    Snippet(
        "go_health_handler", "go", "HealthHandler",
        "serves a JSON health endpoint that reports each dependency check and returns 503 when "
        "one fails",
        "Write a Go net/http handler constructor `HealthHandler(checks map[string]func(context."
        "Context) error, timeout time.Duration) http.Handler`. On GET it runs every check with a "
        "context timeout, responds with JSON {\"status\": \"ok\"|\"degraded\", \"checks\": {name: "
        "\"ok\" | error text}} and status 200 or 503; other methods get 405.",
        r'''package health

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

type report struct {
	Status string            `json:"status"`
	Checks map[string]string `json:"checks"`
}

// HealthHandler runs each dependency check and reports 503 if any fails.
func HealthHandler(checks map[string]func(context.Context) error, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		out := report{Status: "ok", Checks: make(map[string]string, len(checks))}
		for name, check := range checks {
			if err := check(ctx); err != nil {
				out.Status = "degraded"
				out.Checks[name] = err.Error()
			} else {
				out.Checks[name] = "ok"
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if out.Status != "ok" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(out)
	})
}
''',
        {"HealthHandler": ("NewHealthHandler", "ReadinessHandler", "StatusHandler"), "checks": ("probes", "deps")},
        (Bug("				out.Status = \"degraded\"\n", "",
             "--- FAIL: TestHealthHandler/failing_database (0.00s)\n"
             "    health_test.go:58: status = 200, want 503\nFAIL\nFAIL\texample.com/health\t0.006s"),),
        (),
    ),
    Snippet(
        "go_stack", "go", "Stack",
        "is a generic slice-backed stack with Push, Pop and Peek",
        "Implement a generic Go type `Stack[T any]` backed by a slice with methods `Push(v T)`, "
        "`Pop() (T, bool)`, `Peek() (T, bool)` and `Len() int`. Pop and Peek on an empty stack "
        "return the zero value and false. Pop must not keep a reference to the removed element.",
        r'''package collections

// Stack is a LIFO stack backed by a slice.
type Stack[T any] struct {
	items []T
}

// Push adds v on top.
func (s *Stack[T]) Push(v T) {
	s.items = append(s.items, v)
}

// Pop removes and returns the top element.
func (s *Stack[T]) Pop() (T, bool) {
	var zero T
	if len(s.items) == 0 {
		return zero, false
	}
	last := len(s.items) - 1
	v := s.items[last]
	s.items[last] = zero // let the GC reclaim it
	s.items = s.items[:last]
	return v, true
}

// Peek returns the top element without removing it.
func (s *Stack[T]) Peek() (T, bool) {
	var zero T
	if len(s.items) == 0 {
		return zero, false
	}
	return s.items[len(s.items)-1], true
}

// Len is the number of elements.
func (s *Stack[T]) Len() int { return len(s.items) }
''',
        {"Stack": ("LIFO", "Pile"), "items": ("elems", "data")},
        (Bug("v := s.items[last]", "v := s.items[0]",
             "--- FAIL: TestStackOrder (0.00s)\n    stack_test.go:19: Pop() = 1, want 3\nFAIL\n"
             "FAIL\texample.com/collections\t0.003s"),),
        (),
    ),
    Snippet(
        "go_retry", "go", "Retry",
        "retries an operation with exponential backoff until it succeeds or the context ends",
        "Write a Go function `Retry(ctx context.Context, attempts int, base time.Duration, op "
        "func(context.Context) error) error` that calls op up to `attempts` times, sleeping base*2^i "
        "between attempts, returns nil on the first success, stops early with ctx.Err() when the "
        "context is cancelled, and otherwise returns the last error wrapped with the attempt count.",
        r'''package retry

import (
	"context"
	"fmt"
	"time"
)

// Retry calls op until it succeeds, `attempts` runs out, or ctx is done.
func Retry(ctx context.Context, attempts int, base time.Duration, op func(context.Context) error) error {
	var err error
	for i := 0; i < attempts; i++ {
		if err = op(ctx); err == nil {
			return nil
		}
		if i == attempts-1 {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(base << i):
		}
	}
	return fmt.Errorf("after %d attempts: %w", attempts, err)
}
''',
        {"Retry": ("WithBackoff", "Do", "RetryOp"), "attempts": ("maxTries", "tries")},
        (Bug("		if i == attempts-1 {\n			break\n		}\n", "",
             "--- FAIL: TestRetryGivesUp (1.60s)\n    retry_test.go:33: took 1.6s, want < 1s "
             "(slept after the last attempt)\nFAIL\nFAIL\texample.com/retry\t1.612s"),),
        (),
    ),
)
