package notify

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"

	"lockstep/pkg/store"
)

// The logical-replication change source (Config.Source = SourceLogical; DESIGN.md "A second
// change source, logical replication").
//
// One session is one dedicated replication connection (startup parameter
// replication=database, PostgreSQL docs 55.4 "Streaming Replication Protocol"):
//
//  1. CREATE_REPLICATION_SLOT <unique name> TEMPORARY LOGICAL pgoutput. The slot's consistent
//     point fixes where the stream starts: every transaction committing after it is streamed.
//     A temporary slot is dropped by the server when the session ends, however it ends, so a
//     dead replica never pins WAL (55.4 CREATE_REPLICATION_SLOT; 49.2.2 "Replication
//     Slots"). Creating a logical slot waits until every transaction that holds an xid
//     anywhere in the cluster at that moment has ended (decoding needs a consistent starting
//     snapshot): a (re)connect can wait on a long transaction, and meanwhile the replica is
//     `reconnecting` and keeps serving what it holds. slotCreateTimeout bounds one attempt.
//  2. Catch-up from the change log since the watermark, exactly as the LISTEN session does:
//     what committed before the consistent point comes from the log, what commits after it
//     from the stream, and the overlap is re-applied harmlessly (apply is version-guarded).
//  3. START_REPLICATION SLOT ... LOGICAL <consistent point> (proto_version '1',
//     publication_names 'gateway_registry_pub', messages 'true') and stream: pgoutput sends
//     each committed transaction, in commit order, as Begin, Relation (before a relation's
//     first row), Insert..., Commit (PostgreSQL docs 55.5 "Logical Streaming Replication
//     Protocol", 55.9 "Logical Replication Message Formats"). The published table is the
//     change log (sql/002_logical_publication.sql), so each Insert is one change and decodes to
//     the same event a NOTIFY payload does; events are pushed at Commit.
//
// Liveness (PostgreSQL docs 55.4, "Primary keepalive message" and "Standby status update"):
// the session sends a standby status update with the last LSN it has fully handled every
// HeartbeatInterval, with the reply-requested bit set so a healthy walsender answers at once
// with a keepalive, and immediately whenever a keepalive asks for a reply. Anything received
// (XLogData or keepalive) counts as proof of life; nothing for HeartbeatTimeout (a killed or
// SIGSTOPped walsender, a half-open TCP connection) ends the session. The status update →
// keepalive round trip is heartbeat_rtt_ms. Nothing is written to the WAL for liveness: every
// walsender decodes all of the database's WAL, so a periodic message per replica would cost
// R² decodes. A logical decoding message (pg_logical_emit_message, PostgreSQL docs 9.27.6
// "Replication Management Functions") with the prefix lockstep_hb_<replica> is written only on
// demand, as a barrier token (barrier.go).

// PublicationName is the publication the logical source streams (sql/002_logical_publication.sql).
const PublicationName = "gateway_registry_pub"

// logicalHBPrefix prefixes the logical decoding messages this replica writes (barrier tokens).
const logicalHBPrefix = "lockstep_hb_"

// changeLogTable is the one relation the logical source decodes.
const (
	changeLogSchema = "gateway"
	changeLogTable  = "registry_changes"
)

// slotCreateTimeout bounds CREATE_REPLICATION_SLOT, which waits for running transactions.
const slotCreateTimeout = 30 * time.Second

// LogicalApplicationName is the application_name of a replica's replication connection; it is
// what pg_stat_replication and pg_stat_activity (backend_type 'walsender') show.
func LogicalApplicationName(replicaID string) string { return "lockstep-logical-" + replicaID }

// slotName is a replication slot name unique per replica and session: lower-case letters,
// digits and underscores, at most 63 bytes (NAMEDATALEN-1; PostgreSQL docs 55.4
// CREATE_REPLICATION_SLOT, 9.27.6 "slot names").
func slotName(replicaID string) string {
	// 9 + ≤40 + 1 + 8 = ≤58 bytes
	return fmt.Sprintf("lockstep_%s_%08x", sanitize(replicaID), rand.Uint32())
}

// logicalSource is the logical-replication change source (SourceLogical): a heartbeat or
// barrier token is a transactional logical decoding message with the prefix
// lockstep_hb_<replica>.
type logicalSource struct{ s *Syncer }

func (l logicalSource) session(ctx context.Context, first *bool, backoff *time.Duration) error {
	return l.s.logicalSession(ctx, first, backoff)
}

func (l logicalSource) emit(ctx context.Context, payload string) error {
	return l.s.emitHeartbeat(ctx, payload)
}

// lateVisibility: logical decoding can stream a commit just before it becomes visible to
// other sessions (see Syncer.reread).
func (logicalSource) lateVisibility() bool { return true }

// emitHeartbeat writes one heartbeat message into the WAL through the pool. The message is
// transactional, so it is committed, flushed and streamed exactly like a change (Begin,
// Message, Commit) and its round trip measures what a change experiences. A non-transactional
// message has no commit record to flush it: the walsender, which only sends flushed WAL,
// waits for the WAL writer (wal_writer_delay, 200 ms by default) — measured on PostgreSQL 15
// with synchronous_commit=on: ~200 ms for a non-transactional message, <2 ms for a
// transactional one. (PostgreSQL 17 added a flush argument for this; 9.27.6.)
func (s *Syncer) emitHeartbeat(ctx context.Context, nanos string) error {
	return s.cfg.Store.Exec(ctx, "SELECT pg_logical_emit_message(true, $1::text, $2::text)", s.hbChan, nanos)
}

// changeLogColumns maps the change log's columns, by name, to their position in a tuple, as
// the last RelationMessage for it described them (55.9: "Relation" precedes the first row of
// a relation in a session and follows any change of its definition).
type changeLogColumns struct {
	seq, typ, op, id, version, changedAt int
	oids                                 []uint32
}

func mapChangeLog(rel *pglogrepl.RelationMessage) (*changeLogColumns, error) {
	c := &changeLogColumns{seq: -1, typ: -1, op: -1, id: -1, version: -1, changedAt: -1}
	for i, col := range rel.Columns {
		c.oids = append(c.oids, col.DataType)
		switch col.Name {
		case "seq":
			c.seq = i
		case "object_type":
			c.typ = i
		case "op":
			c.op = i
		case "object_id":
			c.id = i
		case "version":
			c.version = i
		case "changed_at":
			c.changedAt = i
		}
	}
	if c.seq < 0 || c.typ < 0 || c.op < 0 || c.id < 0 || c.version < 0 {
		return nil, fmt.Errorf("relation %s.%s lacks a change-log column (seq, object_type, op, object_id, version)", rel.Namespace, rel.RelationName)
	}
	return c, nil
}

// decode turns one change-log tuple into an event. Columns arrive in text format (55.9
// "TupleData": 't'); NULL and unchanged-TOAST columns are treated as missing.
func (c *changeLogColumns) decode(tm *pgtype.Map, tup *pglogrepl.TupleData) (event, error) {
	var ev event
	text := func(i int) (string, bool) {
		if tup == nil || i < 0 || i >= len(tup.Columns) || tup.Columns[i].DataType != pglogrepl.TupleDataTypeText {
			return "", false
		}
		return string(tup.Columns[i].Data), true
	}
	num := func(i int, name string) (int64, error) {
		v, ok := text(i)
		if !ok {
			return 0, fmt.Errorf("%s missing", name)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		return n, nil
	}
	var err error
	if ev.Seq, err = num(c.seq, "seq"); err != nil {
		return ev, err
	}
	if ev.V, err = num(c.version, "version"); err != nil {
		return ev, err
	}
	typ, _ := text(c.typ)
	ev.Type = store.ObjectType(typ)
	ev.Op, _ = text(c.op)
	ev.ID, _ = text(c.id)
	if v, ok := text(c.changedAt); ok {
		var at time.Time
		if err := tm.Scan(c.oids[c.changedAt], pgtype.TextFormatCode, []byte(v), &at); err == nil {
			ev.TS = at.UnixMicro()
		}
	}
	if ev.Type == "" || (ev.ID == "" && ev.Op != "truncate") || ev.Seq <= 0 {
		return ev, errors.New("incomplete change")
	}
	return ev, nil
}

// parseLogical decodes one pgoutput message. pglogrepl's decoders index their input without
// bounds checks; a truncated message must end the session, not the process.
func parseLogical(data []byte) (m pglogrepl.Message, err error) {
	if len(data) == 0 {
		return nil, errors.New("empty pgoutput message")
	}
	defer func() {
		if r := recover(); r != nil {
			m, err = nil, fmt.Errorf("malformed pgoutput message %q: %v", data[0], r)
		}
	}()
	return pglogrepl.Parse(data)
}

// logicalSession runs one replication connection until it fails; see the comment at the top
// of this file for the protocol it follows.
func (s *Syncer) logicalSession(ctx context.Context, first *bool, backoff *time.Duration) error {
	cc, err := s.feedConnConfig()
	if err != nil {
		return err
	}
	pcfg := &cc.Config
	pcfg.ConnectTimeout = 5 * time.Second
	pcfg.RuntimeParams["application_name"] = LogicalApplicationName(s.cfg.ReplicaID)
	pcfg.RuntimeParams["replication"] = "database" // a logical walsender bound to this database (55.4)
	// Tuples arrive as the types' text output, which follows the session's DateStyle and
	// TimeZone; pin them so changed_at parses the same whatever the server defaults are.
	pcfg.RuntimeParams["DateStyle"] = "ISO, MDY"
	pcfg.RuntimeParams["TimeZone"] = "UTC"
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	conn, err := pgconn.ConnectConfig(cctx, pcfg)
	cancel()
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(cctx)
	}()

	slot := slotName(s.cfg.ReplicaID)
	sctx, cancel := context.WithTimeout(ctx, slotCreateTimeout)
	res, err := pglogrepl.CreateReplicationSlot(sctx, conn, slot, "pgoutput", pglogrepl.CreateReplicationSlotOptions{
		Temporary: true, Mode: pglogrepl.LogicalReplication, SnapshotAction: "NOEXPORT_SNAPSHOT",
	})
	cancel()
	if err != nil {
		return fmt.Errorf("create replication slot %s: %w", slot, err)
	}
	start, err := pglogrepl.ParseLSN(res.ConsistentPoint)
	if err != nil {
		return fmt.Errorf("create replication slot %s: consistent point %q: %w", slot, res.ConsistentPoint, err)
	}
	s.log.Debug().Str("slot", slot).Str("consistent_point", res.ConsistentPoint).Msg("temporary replication slot created")
	// The slot is in place: every transaction committing from now on will be streamed. Catch
	// up on what was committed before (or while disconnected), then stream.
	if err := s.requestCatchUp(ctx, *first); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = pglogrepl.StartReplication(rctx, conn, slot, start, pglogrepl.StartReplicationOptions{
		Mode: pglogrepl.LogicalReplication,
		PluginArgs: []string{
			"proto_version '1'",
			"publication_names '" + PublicationName + "'",
			"messages 'true'", // forward logical decoding messages: barrier tokens (PG ≥ 14)
		},
	})
	cancel()
	if err != nil {
		return fmt.Errorf("start replication on slot %s: %w", slot, err)
	}
	s.streaming(first, backoff)
	return s.stream(ctx, conn, start)
}

// stream reads the replication stream until it fails or ctx ends.
func (s *Syncer) stream(ctx context.Context, conn *pgconn.PgConn, start pglogrepl.LSN) error {
	d := &decoder{s: s, handled: start, rels: map[uint32]*changeLogColumns{}, others: map[uint32]bool{}, tm: pgtype.NewMap()}
	var nextStatus, pingSent time.Time
	// one receive deadline until it passes (waitDeadline, listen.go): nextStatus and lastHB
	// only move later between renewals (a reply request is sent at the top of the loop), so a
	// deadline kept is early, never late
	var w waitDeadline
	defer w.stop()
	for {
		now := time.Now()
		if !now.Before(nextStatus) {
			// 55.4 "Standby status update": the reply-requested bit makes the walsender answer
			// with a keepalive at once ("can be used to ping the server").
			if err := pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{
				WALWritePosition: d.handled, ReplyRequested: true,
			}); err != nil {
				return fmt.Errorf("send standby status update: %w", err)
			}
			nextStatus = now.Add(s.cfg.HeartbeatInterval)
			if pingSent.IsZero() {
				pingSent = now
			}
		}
		if w.ctx == nil || w.ctx.Err() != nil {
			// until the next status update, or the moment nothing received for
			// HeartbeatTimeout fails the session (checked below)
			dead := time.Unix(0, s.lastHB.Load()).Add(s.cfg.HeartbeatTimeout + time.Millisecond)
			w.renew(ctx, max(time.Millisecond, time.Until(minTime(nextStatus, dead))))
		}
		msg, err := conn.ReceiveMessage(w.ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && !pgconn.Timeout(err) && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("receive replication message: %w", err)
		}
		if conn.IsClosed() {
			return errors.New("replication connection closed")
		}
		switch msg := msg.(type) {
		case nil: // receive timed out
		case *pgproto3.CopyData:
			now := time.Now()
			s.lastHB.Store(now.UnixNano()) // any XLogData or keepalive is proof of life
			replyNow, keepalive, err := d.copyData(msg.Data)
			if err != nil {
				return err
			}
			if keepalive && !pingSent.IsZero() {
				// the walsender's answer to our reply-requested status update: the probe's
				// round trip (heartbeat_rtt_ms)
				s.hbRTT.Store(now.Sub(pingSent).Nanoseconds())
				s.probes.Add(1)
				pingSent = time.Time{}
			}
			if replyNow {
				nextStatus = time.Time{}
			}
		case *pgproto3.ErrorResponse:
			return fmt.Errorf("replication stream: %w", pgconn.ErrorResponseToPgError(msg))
		case *pgproto3.CopyDone:
			return errors.New("server ended the replication stream")
		}
		if since := time.Since(time.Unix(0, s.lastHB.Load())); since > s.cfg.HeartbeatTimeout {
			return fmt.Errorf("nothing received on the replication stream for %s", since.Round(time.Millisecond))
		}
	}
}

// decoder is one session's pgoutput decoding state.
type decoder struct {
	s       *Syncer
	handled pglogrepl.LSN // last LSN fully handled: reported as written, flushed and applied
	rels    map[uint32]*changeLogColumns
	others  map[uint32]bool // relations other than the change log (none are published today)
	tm      *pgtype.Map
	inTx    bool
	tx      []event // the open transaction's changes, pushed at its Commit
	dropped int64   // changes of the open transaction beyond BufferSize
}

// copyData handles one CopyData message of the replication stream (55.4: XLogData 'w' or
// primary keepalive 'k'); replyNow reports a keepalive that asks for an immediate reply, keepalive any keepalive.
func (d *decoder) copyData(data []byte) (replyNow, keepalive bool, err error) {
	if len(data) == 0 {
		return false, false, errors.New("empty replication message")
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		pkm, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return false, false, fmt.Errorf("keepalive: %w", err)
		}
		if !d.inTx && pkm.ServerWALEnd > d.handled {
			d.handled = pkm.ServerWALEnd // everything sent so far has been handled
		}
		return pkm.ReplyRequested, true, nil
	case pglogrepl.XLogDataByteID:
		xld, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return false, false, fmt.Errorf("xlog data: %w", err)
		}
		m, err := parseLogical(xld.WALData)
		if err != nil {
			return false, false, err
		}
		return false, false, d.message(m)
	}
	return false, false, nil
}

// message handles one pgoutput message (55.9 "Logical Replication Message Formats").
func (d *decoder) message(m pglogrepl.Message) error {
	s := d.s
	switch m := m.(type) {
	case *pglogrepl.BeginMessage:
		d.inTx, d.tx, d.dropped = true, d.tx[:0], 0
	case *pglogrepl.RelationMessage:
		if m.Namespace != changeLogSchema || m.RelationName != changeLogTable {
			d.others[m.RelationID] = true
			delete(d.rels, m.RelationID)
			return nil
		}
		cols, err := mapChangeLog(m)
		if err != nil {
			return err
		}
		d.rels[m.RelationID] = cols
		delete(d.others, m.RelationID)
	case *pglogrepl.InsertMessage:
		cols := d.rels[m.RelationID]
		if cols == nil {
			if d.others[m.RelationID] {
				return nil
			}
			return fmt.Errorf("insert into relation %d before its relation message", m.RelationID)
		}
		received := mono()
		ev, err := cols.decode(d.tm, m.Tuple)
		ev.received, ev.parsed = received, mono()
		if err != nil {
			s.malformed.Add(1)
			s.log.Warn().Err(err).Msg("ignoring malformed change-log row")
			return nil
		}
		if len(d.tx) >= s.cfg.BufferSize {
			d.dropped++ // bounded memory: the change-log poll repairs the rest
			return nil
		}
		d.tx = append(d.tx, ev)
	case *pglogrepl.CommitMessage:
		for _, ev := range d.tx {
			s.push(ev)
		}
		if d.dropped > 0 {
			s.lost(d.dropped)
		}
		d.inTx, d.tx, d.dropped = false, d.tx[:0], 0
		if m.TransactionEndLSN > d.handled {
			d.handled = m.TransactionEndLSN
		}
	case *pglogrepl.LogicalDecodingMessage:
		if m.Prefix == s.hbChan {
			s.heardToken(string(m.Content))
		}
	}
	return nil
}
