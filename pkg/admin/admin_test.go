package admin

import (
	"context"
	"errors"
	"testing"

	"lockstep/pkg/store"
)

func TestWriteAppliesEveryChangeAfterCommitOnly(t *testing.T) {
	st := newFakeStore()
	models, keys := &fakeSink{typ: store.Model}, &fakeSink{typ: store.Key}
	a := New(Deps{Store: st, Registries: []Sink{models, keys}})
	ctx := context.Background()
	old := st.put(store.Key, store.Values{"token": "old"})
	err := a.Write(ctx, func(w *Writer) error {
		if _, err := w.Insert(ctx, store.Model, store.Values{"model_id": "m1", "model_name": "a"}); err != nil {
			return err
		}
		if _, err := w.Update(ctx, store.Model, "m1", store.Values{"model_name": "b"}); err != nil {
			return err
		}
		if _, err := w.Insert(ctx, store.Key, store.Values{"token": "new"}); err != nil {
			return err
		}
		_, err := w.Delete(ctx, store.Key, "old")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(models.applies) != 1 || len(models.applies[0].rows) != 1 || models.applies[0].absent != nil {
		t.Fatalf("models applies: %+v", models.applies)
	}
	if r := models.applies[0].rows[0]; r.ID != "m1" || string(r.Data) == "" || r.Version != 3 {
		t.Fatalf("the last write of m1 is applied: %+v", r)
	}
	if len(keys.applies) != 1 || len(keys.applies[0].rows) != 1 || keys.applies[0].absent["old"] != old.Version+1 {
		t.Fatalf("keys: one Apply with the new row and the old one's tombstone: %+v", keys.applies)
	}

	// a failed transaction applies nothing, whatever it wrote before failing
	boom := errors.New("boom")
	err = a.Write(ctx, func(w *Writer) error {
		if _, err := w.Insert(ctx, store.Model, store.Values{"model_id": "m2"}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) || len(models.applies) != 1 {
		t.Fatalf("err %v, applies %d", err, len(models.applies))
	}
	// a lost commit applies nothing either
	st.failCommit = errDown
	err = a.Write(ctx, func(w *Writer) error {
		_, err := w.Insert(ctx, store.Model, store.Values{"model_id": "m3"})
		return err
	})
	if !errors.Is(err, errDown) || len(models.applies) != 1 {
		t.Fatalf("err %v, applies %d", err, len(models.applies))
	}
	// a type with no registry is written and applied nowhere; Hide makes a row a tombstone
	err = a.Write(ctx, func(w *Writer) error {
		if _, err := w.Insert(ctx, store.Team, store.Values{"team_id": "t"}); err != nil {
			return err
		}
		r, err := w.Insert(ctx, store.Model, store.Values{"model_id": "m4"})
		w.Hide(r)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := models.applies[1]; len(got.rows) != 0 || got.absent["m4"] == 0 {
		t.Fatalf("a hidden row is applied as a tombstone: %+v", got)
	}
}

func TestPGOfNilIsNil(t *testing.T) {
	if PG(nil) != nil {
		t.Fatal("PG(nil) must be a nil Store")
	}
}

func TestRequireDB(t *testing.T) {
	none := New(Deps{})
	var un *Unavailable
	if err := none.RequireDB(store.Model, "models"); !errors.As(err, &un) ||
		un.Msg != "no database configured: models are stored in Postgres; set --database-url or general_settings.database_url" {
		t.Fatal(err)
	}
	if none.Stored(store.Model) {
		t.Fatal("no database: nothing stored")
	}
	a := New(Deps{Store: newFakeStore(), Supported: map[store.ObjectType]bool{store.Model: true}})
	if err := a.RequireDB(store.Model, "models"); err != nil || !a.Stored(store.Model) {
		t.Fatal(err)
	}
	asInvalid(t, a.RequireDB(store.Agent, "agents"), `agents are not stored in the database on this gateway: add "agents" to general_settings.supported_db_objects`)
	if a.Stored(store.Agent) {
		t.Fatal("agents are not stored")
	}
}

func TestNoDatabaseFailsUnavailable(t *testing.T) {
	a := New(Deps{})
	ctx := context.Background()
	for _, err := range []error{
		a.Write(ctx, func(*Writer) error { return nil }),
		func() error { _, err := a.st.Get(ctx, store.Model, "x"); return err }(),
		func() error { _, err := a.st.List(ctx, store.Model); return err }(),
		func() error { _, _, err := a.st.ListPage(ctx, store.Key, 1, 1); return err }(),
		func() error { _, err := a.st.GetKeySpend(ctx, nil); return err }(),
		func() error { _, err := a.st.ListBy(ctx, store.Key, "a", "b"); return err }(),
		func() error { _, _, err := a.st.ListUsers(ctx, store.UserFilter{}, 1, 1); return err }(),
	} {
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("want ErrUnavailable, got %v", err)
		}
	}
}
