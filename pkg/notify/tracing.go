package notify

import (
	"time"

	"lockstep/pkg/telemetry"
)

// traceApplied emits the apply spans of a batch of notified changes (telemetry.ChangesApplied:
// each a child of the change's own trace context, derived from its version, so that every
// replica's apply of one change shares one trace, which the writer's span links to). Changes
// applied by a catch-up or the change-log poll (a missed notification) are not traced.
func traceApplied(start time.Time, batch []event) {
	if !telemetry.Enabled() {
		return
	}
	out := make([]telemetry.Applied, 0, len(batch))
	for _, ev := range batch {
		a := telemetry.Applied{Type: string(ev.Type), Op: ev.Op, ID: ev.ID, Version: ev.V, Seq: ev.Seq}
		if ev.TS > 0 {
			a.Committed = time.UnixMicro(ev.TS)
		}
		out = append(out, a)
	}
	telemetry.ChangesApplied(start, out)
}
