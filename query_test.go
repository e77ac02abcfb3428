package tipkv_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tipkv/tipkv"
)

func TestQueryValidate(t *testing.T) {
	for _, q := range []tipkv.Query{
		{},
		{Limit: 10},
		{From: 3},
		{To: 3},
		{From: 3, To: 3},
		{From: 3, To: 4, Limit: 1, Prefix: "a", After: "x"},
	} {
		require.NoError(t, q.Validate(), "%+v", q)
	}
	for _, q := range []tipkv.Query{
		{Limit: -1},
		{From: -1},
		{To: -1},
		{From: 5, To: 4},
	} {
		err := q.Validate()
		require.ErrorIs(t, err, tipkv.ErrInvalid, "%+v", q)
		require.ErrorContains(t, err, "query:")
	}
}
