package robustness

import (
	"context"
	"fmt"

	"github.com/provisiond/provisiond/internal/robustness/checker"
	"github.com/provisiond/provisiond/rpc/client"
	"github.com/provisiond/provisiond/rpc/params"
)

// The models writer (the admin, ModelAdmin AddModel then RemoveModel of
// the model, empty, so removed in the call: dying, then removed):
// register modelrec/NAME#life (alive, dying, removed; Op.Model
// checker.ModelsModel), entity model/UUID, the
// UUID from the answers (an addition in doubt names none: the removal's
// answer does).
func modelLifeReg(name string) string { return "modelrec/" + name + "#life" }

func readModelLife(name string) func(ctx context.Context, c *client.Conn) (readValue, error) {
	return func(ctx context.Context, c *client.Conn) (readValue, error) {
		ms, err := client.NewModelAdmin(c).ListModels(ctx)
		if err != nil {
			return readValue{}, err
		}
		for _, m := range ms.Models {
			if m.Name == name {
				return readValue{v: m.Life}, nil
			}
		}
		return readValue{v: "removed", absent: true}, nil
	}
}

// addModel adds model name through s and records it; an addition never
// sent records nothing and returns its error (errNoCall). called is the
// call's time.
func (w *workload) addModel(ctx context.Context, s *session, name string) (called int64, err error) {
	add := w.h.rec.begin(s.id, modelLifeReg(name), "", true, "alive")
	add.op.Model = checker.ModelsModel
	err = s.do(ctx, func(ctx context.Context, c *client.Conn) error {
		m, err := client.NewModelAdmin(c).AddModel(ctx, params.AddModelArgs{Name: name})
		if err == nil {
			w.names.set("modelrec/"+name, "model/"+m.UUID)
		}
		return err
	})
	if s.skip(ctx, err) {
		return 0, err
	}
	w.addReg(reg{name: modelLifeReg(name), model: checker.ModelsModel, read: readModelLife(name)})
	add.end(s.daemon, err, "")
	return add.op.Call, err
}

// modelWriter adds a model and removes it, one after another, until ctx
// ends. A removal that gets no answer is made again until one comes (only
// the first is recorded: a model is removed once, and a write in doubt
// may land at any time after its call).
func (w *workload) modelWriter(ctx context.Context, s *session) {
	defer s.close()
	for seq := 0; ctx.Err() == nil; seq++ {
		name := fmt.Sprintf("rm%d-%d", s.id, seq)
		if _, err := w.addModel(ctx, s, name); err != nil {
			continue
		}
		// Two changes of the model's life, which WatchModels reports
		// each: dying, then removed.
		var rms []*call
		for _, v := range []string{"dying", "removed"} {
			rm := w.h.rec.begin(s.id, modelLifeReg(name), "", true, v)
			rm.op.Model = checker.ModelsModel
			rms = append(rms, rm)
		}
		recorded := false
		for ctx.Err() == nil {
			err := s.do(ctx, func(ctx context.Context, c *client.Conn) error {
				m, err := client.NewModelAdmin(c).RemoveModel(ctx, params.RemoveModelArgs{Model: name})
				if err == nil {
					w.names.set("modelrec/"+name, "model/"+m.UUID)
				}
				return err
			})
			if s.skip(ctx, err) {
				continue
			}
			if !recorded {
				for _, rm := range rms {
					rm.op.Call = rms[0].op.Call
					rm.end(s.daemon, err, "")
				}
				recorded = true
			}
			if err == nil || client.IsCode(err, params.CodeNotFound) {
				break // removed, or not there (an addition in doubt that did not land)
			}
		}
	}
}
