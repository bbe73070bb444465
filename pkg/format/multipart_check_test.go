package format

import (
	"bytes"
	"mime/multipart"
	"testing"

	"github.com/stretchr/testify/require"
)

// A repeated or file-typed "model" or "prompt" field is refused; other fields may repeat.
func TestCheckMultipart(t *testing.T) {
	t.Parallel()
	form := func(parts ...[3]string) []byte { // name, filename, value
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		for _, p := range parts {
			var err error
			if p[1] != "" {
				w, e := mw.CreateFormFile(p[0], p[1])
				require.NoError(t, e)
				_, err = w.Write([]byte(p[2]))
			} else {
				err = mw.WriteField(p[0], p[2])
			}
			require.NoError(t, err)
		}
		require.NoError(t, mw.Close())
		return buf.Bytes()
	}
	file := [3]string{"file", "a.wav", "\x00audio"}
	ok := form([3]string{"model", "", "cheap"}, [3]string{"prompt", "", "p"}, file,
		[3]string{"timestamp_granularities[]", "", "word"}, [3]string{"timestamp_granularities[]", "", "segment"})
	require.NoError(t, CheckMultipart(ok))
	for want, body := range map[string][]byte{
		`duplicate form field "model"`:           form([3]string{"model", "", "cheap"}, file, [3]string{"model", "", "gpt-4-expensive"}),
		`duplicate form field "prompt"`:          form([3]string{"model", "", "cheap"}, [3]string{"prompt", "", "a"}, [3]string{"prompt", "", "b"}),
		`form field "prompt" must not be a file`: form([3]string{"model", "", "cheap"}, [3]string{"prompt", "p.txt", "secret"}),
		`form field "model" must not be a file`:  form([3]string{"model", "m.txt", "gpt-4-expensive"}),
	} {
		err := CheckMultipart(body)
		var ue *RequestError
		require.ErrorAs(t, err, &ue, want)
		require.Equal(t, 400, ue.Status())
		require.Equal(t, want, ue.Message)
	}
}
