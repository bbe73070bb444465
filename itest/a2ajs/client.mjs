// A2A JS SDK 1.x client with its default options, driven by itest TestA2AJSClient10 (see
// a2a_v10_test.go). It builds one client per replica from the agent card (ClientFactory with
// default options: the card's supportedInterfaces decide the transport and version), then on
// replica A sends a message and streams one, and on replica B gets the streamed task, gets
// the task the Go 0.3 client streamed (TASK_03) and lists the caller's tasks. It prints one
// JSON report on stdout; any failure exits 1 with the error on stderr.
//
// Env: CARD_A, CARD_B (agent card URLs on replicas A and B), KEY (the caller's key),
// TASK_03 (a task id created over A2A 0.3).
import { ClientFactory } from '@a2a-js/sdk/client';
import { Role, TaskState } from '@a2a-js/sdk';
import { randomUUID } from 'node:crypto';

const { CARD_A, CARD_B, KEY, TASK_03 } = process.env;

// Authentication is the deployment's concern, not a protocol option: every request (card and
// RPC) carries the caller's key, as a gateway in front of the agent requires.
const plainFetch = globalThis.fetch;
globalThis.fetch = (input, init = {}) => {
  const headers = new Headers(init.headers ?? {});
  headers.set('Authorization', `Bearer ${KEY}`);
  return plainFetch(input, { ...init, headers });
};

const text = (parts) => (parts ?? []).map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
const message = (t) => ({
  messageId: randomUUID(), contextId: '', taskId: '', role: Role.ROLE_USER,
  parts: [{ content: { $case: 'text', value: t }, filename: '', mediaType: '' }],
  extensions: [], referenceTaskIds: [],
});

const factory = new ClientFactory(); // default options
const a = await factory.createFromUrl(CARD_A, '');
const b = await factory.createFromUrl(CARD_B, '');
const report = { protocolVersion: a.protocolVersion };

const sent = await a.sendMessage({ tenant: '', message: message('hello from js') });
report.send = { role: sent.role === Role.ROLE_AGENT ? 'ROLE_AGENT' : String(sent.role), text: text(sent.parts), isMessage: 'messageId' in sent };

const events = [];
let streamed = '';
let taskId = '';
for await (const ev of a.sendMessageStream({ tenant: '', message: message('stream from js') })) {
  const c = ev.payload?.$case;
  if (c === 'task') {
    taskId = ev.payload.value.id;
    events.push(`task:${TaskState[ev.payload.value.status?.state]}`);
  } else if (c === 'statusUpdate') {
    events.push(`status:${TaskState[ev.payload.value.status?.state]}`);
  } else if (c === 'artifactUpdate') {
    events.push('artifact');
    streamed += text(ev.payload.value.artifact?.parts);
  } else {
    events.push(`other:${c}`);
  }
}
report.stream = { events, text: streamed, taskId };

const got = await b.getTask({ tenant: '', id: taskId });
report.getOnB = { id: got.id, state: TaskState[got.status?.state], text: text(got.artifacts?.[0]?.parts), history: text(got.history?.[0]?.parts) };

const got03 = await b.getTask({ tenant: '', id: TASK_03 });
report.get03OnB = { id: got03.id, state: TaskState[got03.status?.state], text: text(got03.artifacts?.[0]?.parts) };

const listed = await b.listTasks({ tenant: '', contextId: '', status: 0, pageToken: '', includeArtifacts: true });
report.listOnB = { ids: listed.tasks.map((t) => t.id), totalSize: listed.totalSize, nextPageToken: listed.nextPageToken };

try {
  await b.getTask({ tenant: '', id: randomUUID() });
  report.missing = 'found';
} catch (e) {
  report.missing = e?.constructor?.name ?? String(e);
}

process.stdout.write(JSON.stringify(report) + '\n');
