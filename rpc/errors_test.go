package rpc

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
)

// Each code of ErrorCodes crosses the wire as its entry says: an error
// received with it, even wrapped, matches its own sentinel and no other
// code's, and is retried only when the entry says so. A code outside the
// table is a 500 that matches no sentinel and is not retried.
func TestErrorCodes(t *testing.T) {
	for _, c := range ErrorCodes {
		err := fmt.Errorf("calling: %w", ErrorFromCode(c.Code, "the server's account", c.Status))
		if got := HTTPStatus(c.Code); got != c.Status {
			t.Errorf("%s: HTTPStatus %d, the table says %d", c.Code, got, c.Status)
		}
		if Retryable(err) != c.Retryable {
			t.Errorf("%s: Retryable %v, the table says %v", c.Code, !c.Retryable, c.Retryable)
		}
		if Sentinel(c.Code) != c.Sentinel {
			t.Errorf("%s: Sentinel %v, the table says %v", c.Code, Sentinel(c.Code), c.Sentinel)
		}
		for _, other := range ErrorCodes {
			if other.Sentinel != nil && errors.Is(err, other.Sentinel) != (other.Code == c.Code) {
				t.Errorf("an error of %s: errors.Is(%v) is %v", c.Code, other.Sentinel, !(other.Code == c.Code))
			}
		}
	}
	err := ErrorFromCode("teapot", "short and stout", http.StatusTeapot)
	if HTTPStatus("teapot") != http.StatusInternalServerError || Sentinel("teapot") != nil || errors.Unwrap(err) != nil || Retryable(err) {
		t.Errorf("an unknown code: status %d, sentinel %v, unwraps to %v, retryable %v",
			HTTPStatus("teapot"), Sentinel("teapot"), errors.Unwrap(err), Retryable(err))
	}
}
