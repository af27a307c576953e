package webhookserver

import (
	"context"
	"fmt"
	"mime"
	"net/http"
	"runtime"
	"strconv"
)

// ContentType is the content type of every request the server accepts, the
// one the API server sends its AdmissionReviews and ConversionReviews as.
const ContentType = "application/json"

// bounded is h behind the checks of the package doc.
func (s *Server) bounded(path string, h http.Handler, limit BodyLimit) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log := s.log.WithValues("path", path, "remote", r.RemoteAddr)
		if ct := r.Header.Get("Content-Type"); !isJSON(ct) {
			log.V(1).Info("Refused a webhook request of another content type", "contentType", ct)
			http.Error(w, fmt.Sprintf("the content type is %q: %s accepts %s only, as the API server sends", ct, path, ContentType),
				http.StatusUnsupportedMediaType)
			return
		}
		if r.ContentLength > limit.Bytes {
			msg := tooLarge(path, r.ContentLength, limit)
			log.Info("Refused a webhook request", "reason", msg)
			http.Error(w, msg, http.StatusRequestEntityTooLarge)
			return
		}
		// The request holds its declared length, or the most it may be when
		// it declares none (a chunked body), but never more than the whole
		// budget: a request alone may always run.
		weight := r.ContentLength
		if weight < 0 {
			weight = limit.Bytes
		}
		weight = min(weight, s.opts.MaxBytesInFlight)
		ctx, cancel := context.WithTimeout(r.Context(), budgetWait)
		err := s.budget.Acquire(ctx, weight)
		cancel()
		if err != nil {
			msg := fmt.Sprintf("the webhook server has its budget of %d bytes of requests in flight taken: retry later", s.opts.MaxBytesInFlight)
			if s.opts.BudgetHint != "" {
				msg += ", or " + s.opts.BudgetHint
			}
			log.Info("Refused a webhook request for now", "reason", msg, "bytes", weight)
			w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
			http.Error(w, msg, http.StatusTooManyRequests)
			return
		}
		defer func() {
			s.budget.Release(weight)
			if weight >= collectAfterBytes {
				s.collect()
			}
		}()
		r.Body = http.MaxBytesReader(w, r.Body, limit.Bytes)
		h.ServeHTTP(w, r)
	})
}

// collectAfterBytes is the size of a request after which the server has the
// garbage collector run: the reviews the API server sends are a few KiB, and
// a large one (a list to convert) leaves several times its size of garbage,
// which Go's collector would otherwise let pile up to as much again as the
// heap holds before collecting it. Collecting it when the request is done
// keeps the host's memory to the requests in flight, as the budget means.
const collectAfterBytes = 1 << 20

// collect runs a garbage collection in the background, unless one is
// waiting to start already.
func (s *Server) collect() {
	if s.collectQueued.Swap(true) {
		return
	}
	go func() {
		s.collectQueued.Store(false)
		runtime.GC()
	}()
}

// tooLarge is the message of a 413.
func tooLarge(path string, size int64, limit BodyLimit) string {
	msg := fmt.Sprintf("the request body of %d bytes is over the limit of %d bytes for %s", size, limit.Bytes, path)
	if limit.Hint != "" {
		msg += ": " + limit.Hint
	}
	return msg
}

// isJSON tells whether the content type ct is application/json, with or
// without parameters.
func isJSON(ct string) bool {
	mediaType, _, err := mime.ParseMediaType(ct)
	return err == nil && mediaType == ContentType
}
