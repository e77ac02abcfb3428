package console_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv/console"
	"github.com/tipkv/tipkv/internal/testutil"
)

// Every page renders for a filled store, with what its JSON endpoint
// answers, and carries the security headers; a read-only console offers
// no action.
func TestPagesRender(t *testing.T) {
	db := testutil.OpenMem(t)
	fill(t, db)
	c, err := console.New(db, nil)
	require.NoError(t, err)
	defer c.Close()
	for _, tc := range []struct {
		path string
		want []string
	}{
		{"/", []string{"Overview", "jobs", "Block cache"}},
		{"/collections", []string{`href="/collection?name=orders"`}},
		{"/collection?name=orders", []string{"o-17", "o-18", `{&#34;status&#34;:&#34;shipped&#34;,&#34;total&#34;:42.5}`}},
		{"/document?name=orders&id=o-17", []string{"3 version(s) kept", "shipped", "committed", "ada", "courier picked it up"}},
		{"/document?name=orders&id=o-17&v=2", []string{"As of version 2: version 2", "paid"}},
		{"/document?name=orders&id=gone", []string{"deleted"}},
		{"/diff?name=orders&id=o-17&a=1&b=3", []string{`<span class="del">-   &#34;status&#34;: &#34;placed&#34;,`, `<span class="add">&#43;   &#34;status&#34;: &#34;shipped&#34;,`}},
		{"/streams", []string{`href="/stream?name=audit"`}},
		{"/stream?name=audit", []string{"billing", "/pay", "live tail"}},
		{"/queues", []string{"jobs"}},
		{"/queue?name=jobs", []string{"second", "third", "first", "Dead letters"}},
		{"/message?name=jobs&seq=2", []string{"leased", "lease ends", "second"}},
		{"/message?name=jobs&seq=3", []string{"ready", "third"}},
		{"/deadletter?name=jobs&seq=1", []string{"first", "00-abc-01"}},
	} {
		rec := get(t, c, tc.path)
		require.Equal(t, http.StatusOK, rec.code, "%s: %s", tc.path, rec.body)
		for _, w := range tc.want {
			require.Contains(t, rec.body, w, tc.path)
		}
		require.NotContains(t, rec.body, "Requeue", tc.path)
		require.Contains(t, rec.hdr.Get("Content-Security-Policy"), "frame-ancestors 'none'")
		require.Equal(t, "nosniff", rec.hdr.Get("X-Content-Type-Options"))
		require.True(t, strings.HasPrefix(rec.hdr.Get("Content-Type"), "text/html"))
	}
}
