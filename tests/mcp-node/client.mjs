#!/usr/bin/env node
// Independent MCP client test for elicitd, written against the OFFICIAL MCP
// TypeScript SDK, v2 line (`@modelcontextprotocol/client`, pinned in
// package.json). Usage:
//
//   node client.mjs <baseUrl> <apiKey> <mode>      mode = initialize | stateless
//
// <baseUrl> is the server root (e.g. http://127.0.0.1:8080); the MCP endpoint
// is <baseUrl>/mcp and the reviewer REST endpoint is <baseUrl>/v1/reviews/{token}.
//
// Modes:
//   initialize — the 2025-era handshake. The SDK's default ("legacy") version
//                negotiation sends `initialize` with protocolVersion 2025-11-25
//                (LATEST_PROTOCOL_VERSION of @modelcontextprotocol/core 2.4.0),
//                then `notifications/initialized`, then one POST per request
//                with the `MCP-Protocol-Version` header set to the negotiated
//                version.
//   stateless  — protocol revision 2026-07-28 (sessionless). Done by the SDK
//                itself: `new Client(info, { versionNegotiation: { mode: { pin:
//                '2026-07-28' } } })`. The client sends `server/discover`
//                instead of `initialize`, attaches the per-request `_meta`
//                envelope (io.modelcontextprotocol/protocolVersion,
//                io.modelcontextprotocol/clientInfo,
//                io.modelcontextprotocol/clientCapabilities) to every request,
//                and its Streamable HTTP transport derives the SEP-2243 headers
//                `MCP-Protocol-Version`, `Mcp-Method` and (tools/call:
//                params.name) `Mcp-Name` from the body. No hand-rolled
//                transport is used; a recording `fetch` wrapper only OBSERVES
//                the wire so that the checks below can assert those headers
//                and `_meta` keys really went out.
//
// Sources for the 2026-07-28 wire rules asserted below (read in the installed
// package, node_modules/@modelcontextprotocol/):
//   - client/dist/client-*.d.mts, `ClientOptions.versionNegotiation` docs
//     (pin / auto / legacy semantics, per-request `_meta` envelope);
//   - client/dist/index.mjs, `StreamableHTTPClientTransport._applyBodyDerivedHeaders`
//     (mcp-protocol-version / mcp-method / mcp-name derived from the body);
//   - client/dist/src-*.mjs, `MCP_NAME_HEADER_SOURCE` (tools/call -> params.name,
//     SEP-2243 "Standard Request Headers") and the 2026 codec
//     ("servers implementing protocol revision 2026-07-28 MUST include
//     resultType");
//   - core/dist/schemas-*.mjs, the `*_META_KEY` constants;
//   - on the server side, rmcp 3.11's `rmcp::model::ProtocolVersion` (the versions it
//     negotiates, up to 2026-07-28) and its Streamable HTTP server (which requires
//     `Mcp-Method` on 2026-07-28 requests).
//
// Output: one line per check ("ok   - ..." / "FAIL - ...") and a final line
// "mcp-node <mode>: N passed, M failed". Exit code 0 only when M == 0.

import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual, inspect } from 'node:util';
import {
    Client,
    StreamableHTTPClientTransport,
    ProtocolError,
    UnauthorizedError,
    isCallToolResult,
    PROTOCOL_VERSION_META_KEY,
    CLIENT_INFO_META_KEY,
    CLIENT_CAPABILITIES_META_KEY
} from '@modelcontextprotocol/client';

const MODERN_VERSION = '2026-07-28';
const LEGACY_OK_VERSIONS = ['2025-06-18', '2025-11-25'];
const EXPECTED_TOOLS = [
    'elicit_approval',
    'elicit_await',
    'elicit_cancel',
    'elicit_ping',
    'elicit_proposal',
    'elicit_result',
    'elicit_selection',
    'elicit_status'
];
const REQUEST_TIMEOUT_MS = 15_000; // per plain MCP request
const AWAIT_TIMEOUT_MS = 35_000; // elicit_await never asks the server for more than 30 s
const WATCHDOG_MS = 60_000; // hard stop for the whole run

// ---------------------------------------------------------------- arguments
const [baseArg, apiKey, mode] = process.argv.slice(2);
if (!baseArg || !apiKey || !['initialize', 'stateless'].includes(mode)) {
    console.error('usage: node client.mjs <baseUrl> <apiKey> <initialize|stateless>');
    process.exit(2);
}
const base = baseArg.replace(/\/+$/, '');
const mcpUrl = new URL(`${base}/mcp`);

// ---------------------------------------------------------------- reporting
let passed = 0;
let failed = 0;
const t0 = Date.now();

function finish() {
    const secs = ((Date.now() - t0) / 1000).toFixed(1);
    console.log(`# elapsed ${secs}s`);
    console.log(`mcp-node ${mode}: ${passed} passed, ${failed} failed`);
    process.exit(failed === 0 && passed > 0 ? 0 : 1);
}

const watchdog = setTimeout(() => {
    console.log(`FAIL - watchdog: run exceeded ${WATCHDOG_MS / 1000}s, aborting`);
    failed++;
    finish();
}, WATCHDOG_MS);
watchdog.unref();

function fmt(v) {
    return inspect(v, { depth: 6, breakLength: Infinity, maxStringLength: 400 });
}

class CheckFailure extends Error {}
function assert(cond, msg) {
    if (!cond) throw new CheckFailure(msg);
}

/** Run one named check; a thrown error marks it failed. Returns the body's value or undefined. */
async function check(name, fn) {
    try {
        const value = await fn();
        passed++;
        console.log(`ok   - ${name}`);
        return value;
    } catch (err) {
        failed++;
        const detail = err instanceof CheckFailure ? err.message : `${err?.name ?? 'Error'}: ${err?.message ?? fmt(err)}`;
        console.log(`FAIL - ${name}: ${detail}`);
        return undefined;
    }
}

// ---------------------------------------------------------------- wire recorder
// Wraps global fetch for the SDK transport; records what the SDK sent and
// what came back, without changing anything.
function makeRecorder() {
    const exchanges = [];
    const recordingFetch = async (input, init = {}) => {
        const headers = new Headers(init.headers ?? {});
        let body;
        if (typeof init.body === 'string') {
            try {
                body = JSON.parse(init.body);
            } catch {
                body = init.body;
            }
        }
        const entry = {
            httpMethod: (init.method ?? 'GET').toUpperCase(),
            headers: Object.fromEntries(headers.entries()),
            body,
            status: undefined,
            responseHeaders: undefined,
            responseJson: undefined
        };
        exchanges.push(entry);
        const response = await fetch(input, init);
        entry.status = response.status;
        entry.responseHeaders = Object.fromEntries(response.headers.entries());
        if ((response.headers.get('content-type') ?? '').startsWith('application/json')) {
            try {
                entry.responseJson = await response.clone().json();
            } catch {
                /* not JSON after all */
            }
        }
        return response;
    };
    return { exchanges, fetch: recordingFetch };
}

/** JSON-RPC requests (single, not notifications) among the recorded POSTs. */
function recordedRequests(exchanges) {
    return exchanges.filter(
        (e) => e.httpMethod === 'POST' && e.body && !Array.isArray(e.body) && typeof e.body.method === 'string' && e.body.id !== undefined
    );
}

// ---------------------------------------------------------------- MCP client
function newClient(key, recorder) {
    const options =
        mode === 'stateless'
            ? { versionNegotiation: { mode: { pin: MODERN_VERSION }, probe: { timeoutMs: REQUEST_TIMEOUT_MS } } }
            : { versionNegotiation: { mode: 'legacy' } };
    const client = new Client({ name: 'elicitd-mcp-node-test', version: '0.1.0' }, options);
    const transport = new StreamableHTTPClientTransport(mcpUrl, {
        // Static bearer key: token() is called before every request. No
        // onUnauthorized, so a 401 surfaces as UnauthorizedError.
        authProvider: { token: async () => key },
        fetch: recorder.fetch
    });
    return { client, transport };
}

async function callTool(client, name, args, timeout = REQUEST_TIMEOUT_MS) {
    return client.callTool({ name, arguments: args }, { timeout });
}

function textOf(result) {
    const block = (result?.content ?? []).find((c) => c.type === 'text');
    return block?.text;
}

/** A successful tool result: isError false, structuredContent object, a text block carrying the same JSON. */
function expectOk(result, what) {
    assert(isCallToolResult(result), `${what}: not a CallToolResult: ${fmt(result)}`);
    assert(result.isError !== true, `${what}: isError=true: ${fmt(textOf(result))}`);
    const sc = result.structuredContent;
    assert(sc !== null && typeof sc === 'object' && !Array.isArray(sc), `${what}: structuredContent is not an object: ${fmt(sc)}`);
    const text = textOf(result);
    assert(typeof text === 'string', `${what}: no text content block: ${fmt(result.content)}`);
    return { sc, text };
}

function expectSameJson(text, sc, what) {
    let parsed;
    try {
        parsed = JSON.parse(text);
    } catch {
        throw new CheckFailure(`${what}: text content is not JSON: ${fmt(text)}`);
    }
    assert(isDeepStrictEqual(parsed, sc), `${what}: text JSON ${fmt(parsed)} != structuredContent ${fmt(sc)}`);
}

/** A domain failure: isError true and the text starts with the error code. */
function expectDomainError(result, code, what) {
    assert(isCallToolResult(result), `${what}: not a CallToolResult: ${fmt(result)}`);
    assert(result.isError === true, `${what}: expected isError=true, got ${fmt(result)}`);
    const text = textOf(result);
    assert(typeof text === 'string' && text.startsWith(code), `${what}: expected text starting with "${code}", got ${fmt(text)}`);
    return text;
}

function isIsoDate(s) {
    return typeof s === 'string' && !Number.isNaN(Date.parse(s));
}

/** The reviewer's decision over REST (no API key), token = last path segment of reviewUrl. */
async function decide(reviewUrl, body) {
    const token = new URL(reviewUrl, base).pathname.split('/').filter(Boolean).pop();
    assert(token, `cannot take a token from reviewUrl ${fmt(reviewUrl)}`);
    const res = await fetch(`${base}/v1/reviews/${encodeURIComponent(token)}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS)
    });
    const text = await res.text();
    assert(res.status >= 200 && res.status < 300, `POST /v1/reviews/${token} answered HTTP ${res.status}: ${text.slice(0, 300)}`);
    return res.status;
}

function errorChain(err) {
    const out = [];
    for (let e = err, i = 0; e && i < 8; e = e.cause, i++) out.push(e);
    return out;
}

// ---------------------------------------------------------------- the run
async function main() {
    console.log(`# mcp-node ${mode} against ${mcpUrl.href}`);
    const recorder = makeRecorder();
    const { client, transport } = newClient(apiKey, recorder);

    const connected = await check(`connect (${mode === 'stateless' ? 'server/discover, pinned ' + MODERN_VERSION : 'initialize handshake'})`, async () => {
        await client.connect(transport, { timeout: REQUEST_TIMEOUT_MS });
        const era = client.getProtocolEra();
        const version = client.getNegotiatedProtocolVersion();
        if (mode === 'stateless') {
            assert(era === 'modern', `protocol era ${fmt(era)}, expected 'modern'`);
            assert(version === MODERN_VERSION, `negotiated ${fmt(version)}, expected ${MODERN_VERSION}`);
            const discover = client.getDiscoverResult();
            assert(Array.isArray(discover?.supportedVersions) && discover.supportedVersions.includes(MODERN_VERSION), `server/discover supportedVersions ${fmt(discover?.supportedVersions)} lacks ${MODERN_VERSION}`);
            assert(discover?.capabilities?.tools, `server/discover capabilities lack tools: ${fmt(discover?.capabilities)}`);
        } else {
            assert(era === 'legacy', `protocol era ${fmt(era)}, expected 'legacy'`);
            assert(LEGACY_OK_VERSIONS.includes(version), `negotiated ${fmt(version)}, expected one of ${LEGACY_OK_VERSIONS.join(', ')}`);
            assert(client.getServerCapabilities()?.tools, `initialize capabilities lack tools: ${fmt(client.getServerCapabilities())}`);
        }
        return true;
    });
    if (!connected) {
        console.log('# cannot continue without a connection');
        finish();
    }

    // ---- tools/list
    await check('tools/list: exactly the 8 elicit_* tools, each with inputSchema + outputSchema and the right annotations', async () => {
        const { tools } = await client.listTools(undefined, { timeout: REQUEST_TIMEOUT_MS });
        const names = tools.map((t) => t.name).sort();
        assert(isDeepStrictEqual(names, EXPECTED_TOOLS), `tool names ${fmt(names)} != ${fmt(EXPECTED_TOOLS)}`);
        for (const t of tools) {
            assert(t.inputSchema && t.inputSchema.type === 'object', `${t.name}: inputSchema missing or not type object: ${fmt(t.inputSchema)}`);
            assert(t.outputSchema && typeof t.outputSchema === 'object', `${t.name}: outputSchema missing: ${fmt(t.outputSchema)}`);
        }
        const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
        for (const n of ['elicit_status', 'elicit_await']) {
            assert(byName[n].annotations?.readOnlyHint === true, `${n}: annotations.readOnlyHint is ${fmt(byName[n].annotations?.readOnlyHint)}, expected true`);
        }
        assert(byName.elicit_cancel.annotations?.destructiveHint === true, `elicit_cancel: annotations.destructiveHint is ${fmt(byName.elicit_cancel.annotations?.destructiveHint)}, expected true`);
    });

    // ---- ping
    await check('elicit_ping: text "pong: <message>", structuredContent {pong}', async () => {
        const msg = `hello ${mode}`;
        const r = await callTool(client, 'elicit_ping', { message: msg });
        const { sc, text } = expectOk(r, 'elicit_ping');
        assert(sc.pong === msg, `structuredContent ${fmt(sc)}, expected {pong: ${fmt(msg)}}`);
        assert(text === `pong: ${msg}`, `text ${fmt(text)}, expected ${fmt(`pong: ${msg}`)}`);
    });

    // ---- approval flow
    const context = { run: randomUUID(), mode, nested: { ticket: 'OPS-42', amounts: [1, 2.5, 3] }, flag: true };
    const approval = await check('elicit_approval: created pending with elicitationId, reviewUrl, expiresAt', async () => {
        const r = await callTool(client, 'elicit_approval', {
            message: `Deploy build ${context.run}?`,
            title: 'mcp-node approval',
            context,
            expiresInSeconds: 600,
            labels: ['mcp-node', mode],
            idempotencyKey: `mcp-node-${context.run}`
        });
        const { sc, text } = expectOk(r, 'elicit_approval');
        expectSameJson(text, sc, 'elicit_approval');
        assert(typeof sc.elicitationId === 'string' && sc.elicitationId.length > 0, `elicitationId ${fmt(sc.elicitationId)}`);
        assert(sc.status === 'pending', `status ${fmt(sc.status)}, expected pending`);
        assert(typeof sc.reviewUrl === 'string' && sc.reviewUrl.length > 0, `reviewUrl ${fmt(sc.reviewUrl)}`);
        assert(isIsoDate(sc.expiresAt) && Date.parse(sc.expiresAt) > Date.now(), `expiresAt ${fmt(sc.expiresAt)} not a future timestamp`);
        return sc;
    });
    const need = (v, what) => assert(v, `skipped: ${what} was not created`);

    await check('elicit_status: pending, kind approval', async () => {
        need(approval, 'approval');
        const r = await callTool(client, 'elicit_status', { elicitationId: approval.elicitationId });
        const { sc, text } = expectOk(r, 'elicit_status');
        expectSameJson(text, sc, 'elicit_status');
        assert(sc.elicitationId === approval.elicitationId, `elicitationId ${fmt(sc.elicitationId)}`);
        assert(sc.status === 'pending', `status ${fmt(sc.status)}, expected pending`);
        assert(sc.kind === 'approval', `kind ${fmt(sc.kind)}, expected approval`);
        assert(isIsoDate(sc.createdAt) && isIsoDate(sc.expiresAt), `createdAt/expiresAt not timestamps: ${fmt(sc)}`);
        assert(sc.decidedAt === undefined || sc.decidedAt === null, `decidedAt set while pending: ${fmt(sc.decidedAt)}`);
    });

    await check('elicit_result before the decision: isError not_decided', async () => {
        need(approval, 'approval');
        const r = await callTool(client, 'elicit_result', { elicitationId: approval.elicitationId });
        expectDomainError(r, 'not_decided', 'elicit_result');
    });

    const decided = await check('reviewer decides over REST (submitted, comment "ok")', async () => {
        need(approval, 'approval');
        await decide(approval.reviewUrl, { decision: 'submitted', comment: 'ok' });
        return true;
    });

    await check('elicit_await after the decision: submitted, well under waitSeconds', async () => {
        need(approval, 'approval');
        need(decided, 'decision');
        const started = Date.now();
        const r = await callTool(client, 'elicit_await', { elicitationId: approval.elicitationId, waitSeconds: 25 }, AWAIT_TIMEOUT_MS);
        const took = Date.now() - started;
        const { sc, text } = expectOk(r, 'elicit_await');
        expectSameJson(text, sc, 'elicit_await');
        assert(sc.status === 'submitted', `status ${fmt(sc.status)}, expected submitted`);
        assert(isIsoDate(sc.decidedAt), `decidedAt ${fmt(sc.decidedAt)}`);
        assert(took < 5_000, `await took ${took} ms (waitSeconds 25): expected an immediate answer for a decided elicitation`);
    });

    await check('elicit_result: consumed, decision submitted, context echoed, comment "ok"', async () => {
        need(approval, 'approval');
        need(decided, 'decision');
        const r = await callTool(client, 'elicit_result', { elicitationId: approval.elicitationId });
        const { sc, text } = expectOk(r, 'elicit_result');
        expectSameJson(text, sc, 'elicit_result');
        assert(sc.elicitationId === approval.elicitationId, `elicitationId ${fmt(sc.elicitationId)}`);
        assert(sc.kind === 'approval', `kind ${fmt(sc.kind)}, expected approval`);
        assert(sc.status === 'consumed', `status ${fmt(sc.status)}, expected consumed`);
        assert(sc.decision === 'submitted', `decision ${fmt(sc.decision)}, expected submitted`);
        assert(isDeepStrictEqual(sc.context, context), `context ${fmt(sc.context)} != sent ${fmt(context)}`);
        assert(sc.comment === 'ok', `comment ${fmt(sc.comment)}, expected "ok"`);
        assert('formSubmission' in sc, `formSubmission missing: ${fmt(sc)}`);
        assert(isIsoDate(sc.decidedAt), `decidedAt ${fmt(sc.decidedAt)}`);
    });

    await check('elicit_cancel after the decision: isError already_decided', async () => {
        need(approval, 'approval');
        need(decided, 'decision');
        const r = await callTool(client, 'elicit_cancel', { elicitationId: approval.elicitationId });
        expectDomainError(r, 'already_decided', 'elicit_cancel');
    });

    await check('elicit_status of an unknown id: isError not_found', async () => {
        const r = await callTool(client, 'elicit_status', { elicitationId: randomUUID() });
        expectDomainError(r, 'not_found', 'elicit_status');
    });

    await check('elicit_approval without message: JSON-RPC error -32602 (not a tool result)', async () => {
        let r;
        try {
            r = await callTool(client, 'elicit_approval', { title: 'no message here' });
        } catch (err) {
            assert(err instanceof ProtocolError, `expected ProtocolError, got ${err?.name}: ${err?.message}`);
            assert(err.code === -32602, `JSON-RPC error code ${fmt(err.code)}, expected -32602 (${err.message})`);
            return;
        }
        throw new CheckFailure(`expected a JSON-RPC error, got a tool result ${fmt(r)}`);
    });

    // ---- selection flow: await runs BEFORE the decision and must wake on it
    const selection = await check('elicit_selection: created pending', async () => {
        const r = await callTool(client, 'elicit_selection', {
            message: 'Pick the regions to deploy to',
            options: [
                { id: 'eu', label: 'Europe', description: 'eu-west' },
                { id: 'us', label: 'United States' },
                { id: 'ap' }
            ],
            minSelections: 1,
            maxSelections: 2,
            context: { run: context.run, kind: 'selection' }
        });
        const { sc, text } = expectOk(r, 'elicit_selection');
        expectSameJson(text, sc, 'elicit_selection');
        assert(typeof sc.elicitationId === 'string' && sc.elicitationId.length > 0, `elicitationId ${fmt(sc.elicitationId)}`);
        assert(sc.status === 'pending', `status ${fmt(sc.status)}, expected pending`);
        assert(typeof sc.reviewUrl === 'string' && sc.reviewUrl.length > 0, `reviewUrl ${fmt(sc.reviewUrl)}`);
        assert(isIsoDate(sc.expiresAt), `expiresAt ${fmt(sc.expiresAt)}`);
        return sc;
    });

    await check('elicit_await on a pending selection wakes on the REST decision (selectedIds [eu, ap])', async () => {
        need(selection, 'selection');
        const started = Date.now();
        const awaiting = callTool(client, 'elicit_await', { elicitationId: selection.elicitationId, waitSeconds: 10 }, AWAIT_TIMEOUT_MS);
        awaiting.catch(() => {}); // handled below; avoid an unhandled rejection while we decide
        await new Promise((res) => setTimeout(res, 500));
        await decide(selection.reviewUrl, { decision: 'submitted', selectedIds: ['eu', 'ap'], comment: 'two regions' });
        const r = await awaiting;
        const took = Date.now() - started;
        const { sc } = expectOk(r, 'elicit_await');
        assert(sc.status === 'submitted', `status ${fmt(sc.status)}, expected submitted`);
        assert(sc.kind === 'selection', `kind ${fmt(sc.kind)}, expected selection`);
        assert(took < 6_000, `await took ${took} ms (decision after ~500 ms, waitSeconds 10): it did not wake on the decision`);
    });

    await check('elicit_result of the selection: consumed with selectedIds [eu, ap]', async () => {
        need(selection, 'selection');
        const r = await callTool(client, 'elicit_result', { elicitationId: selection.elicitationId });
        const { sc, text } = expectOk(r, 'elicit_result');
        expectSameJson(text, sc, 'elicit_result');
        assert(sc.status === 'consumed', `status ${fmt(sc.status)}, expected consumed`);
        assert(sc.decision === 'submitted', `decision ${fmt(sc.decision)}`);
        assert(isDeepStrictEqual([...(sc.selectedIds ?? [])].sort(), ['ap', 'eu']), `selectedIds ${fmt(sc.selectedIds)}, expected [eu, ap]`);
        assert(sc.comment === 'two regions', `comment ${fmt(sc.comment)}`);
    });

    // ---- wire-level checks on what the SDK actually sent / received
    const reqs = recordedRequests(recorder.exchanges);
    if (mode === 'stateless') {
        await check('wire: no initialize; first request server/discover; no Mcp-Session-Id', async () => {
            assert(reqs.length > 0, 'no requests recorded');
            assert(!reqs.some((e) => e.body.method === 'initialize'), 'an initialize request was sent');
            assert(reqs[0].body.method === 'server/discover', `first request was ${fmt(reqs[0].body.method)}`);
            const withSession = recorder.exchanges.filter((e) => e.responseHeaders && 'mcp-session-id' in e.responseHeaders);
            assert(withSession.length === 0, `server sent Mcp-Session-Id on ${withSession.length} responses`);
        });
        await check(`wire: every request has MCP-Protocol-Version ${MODERN_VERSION}, Mcp-Method = method, _meta envelope`, async () => {
            for (const e of reqs) {
                const m = e.body.method;
                assert(e.headers['mcp-protocol-version'] === MODERN_VERSION, `${m}: MCP-Protocol-Version ${fmt(e.headers['mcp-protocol-version'])}`);
                assert(e.headers['mcp-method'] === m, `${m}: Mcp-Method ${fmt(e.headers['mcp-method'])}`);
                const meta = e.body.params?._meta ?? {};
                assert(meta[PROTOCOL_VERSION_META_KEY] === MODERN_VERSION, `${m}: _meta[${PROTOCOL_VERSION_META_KEY}] ${fmt(meta[PROTOCOL_VERSION_META_KEY])}`);
                assert(meta[CLIENT_INFO_META_KEY]?.name === 'elicitd-mcp-node-test', `${m}: _meta[${CLIENT_INFO_META_KEY}] ${fmt(meta[CLIENT_INFO_META_KEY])}`);
                assert(meta[CLIENT_CAPABILITIES_META_KEY] && typeof meta[CLIENT_CAPABILITIES_META_KEY] === 'object', `${m}: _meta[${CLIENT_CAPABILITIES_META_KEY}] missing`);
            }
        });
        await check('wire: tools/call carries Mcp-Name = tool name; JSON results carry resultType "complete"', async () => {
            const calls = reqs.filter((e) => e.body.method === 'tools/call');
            assert(calls.length >= 10, `only ${calls.length} tools/call requests recorded`);
            for (const e of calls) {
                assert(e.headers['mcp-name'] === e.body.params.name, `tools/call ${e.body.params.name}: Mcp-Name ${fmt(e.headers['mcp-name'])}`);
                const res = e.responseJson;
                if (res && res.result) {
                    assert(res.result.resultType === 'complete', `tools/call ${e.body.params.name}: resultType ${fmt(res.result.resultType)}`);
                }
            }
        });
    } else {
        await check('wire: initialize (2025-era) first, then MCP-Protocol-Version on every request, no 2026 _meta, no Mcp-Session-Id', async () => {
            assert(reqs.length > 0, 'no requests recorded');
            assert(reqs[0].body.method === 'initialize', `first request was ${fmt(reqs[0].body.method)}`);
            assert(LEGACY_OK_VERSIONS.includes(reqs[0].body.params?.protocolVersion), `initialize asked for ${fmt(reqs[0].body.params?.protocolVersion)}`);
            assert(!reqs.some((e) => e.body.method === 'server/discover'), 'server/discover was sent in initialize mode');
            const negotiated = client.getNegotiatedProtocolVersion();
            for (const e of reqs.slice(1)) {
                assert(e.headers['mcp-protocol-version'] === negotiated, `${e.body.method}: MCP-Protocol-Version ${fmt(e.headers['mcp-protocol-version'])} != ${negotiated}`);
                assert(!(PROTOCOL_VERSION_META_KEY in (e.body.params?._meta ?? {})), `${e.body.method}: carries a 2026 _meta envelope`);
            }
            const withSession = recorder.exchanges.filter((e) => e.responseHeaders && 'mcp-session-id' in e.responseHeaders);
            assert(withSession.length === 0, `server sent Mcp-Session-Id on ${withSession.length} responses (expected stateless)`);
        });
    }

    await client.close().catch(() => {});

    // ---- wrong API key
    await check('a client with a wrong API key fails (HTTP 401)', async () => {
        const rec = makeRecorder();
        const { client: bad, transport: badTransport } = newClient(`${apiKey}-wrong`, rec);
        let error;
        try {
            await bad.connect(badTransport, { timeout: REQUEST_TIMEOUT_MS });
            // Some negotiation paths could defer the first round trip: force one.
            await bad.listTools(undefined, { timeout: REQUEST_TIMEOUT_MS });
        } catch (err) {
            error = err;
        } finally {
            await bad.close().catch(() => {});
        }
        assert(error, 'connect and tools/list succeeded with a wrong key');
        const statuses = rec.exchanges.map((e) => e.status);
        const chain = errorChain(error);
        const looks401 = chain.some((e) => e instanceof UnauthorizedError || e?.status === 401 || e?.data?.status === 401 || /\b401\b|unauthori[sz]ed/i.test(String(e?.message)));
        assert(statuses.includes(401), `no HTTP 401 seen on the wire (statuses ${fmt(statuses)}); error ${error?.name}: ${error?.message}`);
        assert(looks401, `error does not say 401/unauthorized: ${error?.name}: ${error?.message}`);
    });
}

main()
    .catch((err) => {
        failed++;
        console.log(`FAIL - unexpected error: ${err?.stack ?? fmt(err)}`);
    })
    .finally(finish);
