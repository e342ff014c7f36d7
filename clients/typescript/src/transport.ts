/**
 * HTTP/1.1 on persistent keep-alive connections, with Node's own `http` and
 * `https` modules.
 *
 * Not `fetch`: on loopback a small POST through `fetch` (undici) costs about
 * three times the CPU of `http.request` on a keep-alive `Agent` (measured
 * ~450 us against ~130 us per call on Node 20), and a worker makes one call
 * per batch of jobs, so that cost is a large share of each job's.
 */

import http from "node:http";
import https from "node:https";
import type { Socket } from "node:net";
import { Unavailable } from "./errors.js";

/** What the server answered: the status and the body's text. */
export interface Answer {
  status: number;
  text: string;
}

/**
 * The failures that mean the server closed an idle keep-alive connection
 * just as it was reused: nothing was processed, so sending again is safe.
 */
const STALE_CONNECTION = new Set(["ECONNRESET", "EPIPE", "ECONNABORTED"]);

/** Idle keep-alive connections are closed after this long (not reused). */
const IDLE_CLOSE_MS = 5_000;

/**
 * How writing a request fails when the server stopped reading it: it
 * answered (413 for a body over its limit, after reading the first part)
 * and closed with the rest unread, so the kernel reset the connection.
 */
const WRITE_REFUSED = new Set(["EPIPE", "ECONNRESET", "ECONNABORTED"]);

/** On a socket: the write error `guardWrites` held back (the first one). */
const refusedWrite = Symbol("relay.refusedWrite");
/** On a socket: `guardWrites` has wrapped its writes. */
const guarded = Symbol("relay.guardedWrites");

type GuardedSocket = Socket & { [refusedWrite]?: Error; [guarded]?: true };

export class Transport {
  private readonly module: typeof http | typeof https;
  private readonly agent: http.Agent;
  private readonly host: string;
  private readonly port: number;
  private readonly prefix: string;
  /**
   * Refuses a URL that is not http:// or https:// at once (a TypeError), as
   * the Python client does: a URL without its scheme ("127.0.0.1:7433")
   * would otherwise fail every call as if the server were down, and a
   * Worker would wait for it forever.
   */
  constructor(readonly url: string, private readonly token?: string) {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      throw new TypeError(`not an http:// or https:// URL: ${JSON.stringify(url)} (write it as http://host:port)`);
    }
    if ((u.protocol !== "http:" && u.protocol !== "https:") || !u.hostname) {
      throw new TypeError(`not an http:// or https:// URL: ${JSON.stringify(url)} (write it as http://host:port)`);
    }
    this.module = u.protocol === "https:" ? https : http;
    // LIFO: the most recently used connection is reused first, so spare
    // ones go idle and are closed instead of being kept warm in turn.
    // `timeout`: a connection idle this long is closed by the agent (only
    // free ones; a request's own wait is `timeoutMs`), before the server
    // would close it under a reuse, which fails a request not safe to send
    // again.
    this.agent = new this.module.Agent({ keepAlive: true, scheduling: "lifo", timeout: IDLE_CLOSE_MS });
    this.host = u.hostname.replace(/^\[|\]$/g, "");
    this.port = Number(u.port) || (u.protocol === "https:" ? 443 : 80);
    this.prefix = u.pathname.replace(/\/+$/, "");
  }

  /**
   * Sends one request; resolves with any answer the server gave, rejects
   * with `Unavailable` when none came (refused, reset, timed out).
   * `repeatable`: the request is safe to send twice, so one that failed on
   * a reused connection before any answer byte is sent again on a fresh
   * one (the server may have processed it: not done for the others).
   * `headers`: sent with the request besides the content and token ones.
   */
  async request(
    method: string,
    path: string,
    body: string | undefined,
    timeoutMs: number,
    repeatable = false,
    headers: Record<string, string> = {},
  ): Promise<Answer> {
    try {
      return await this.attempt(method, path, body, timeoutMs, false, headers);
    } catch (e) {
      if (!(e instanceof StaleConnection)) throw unavailable(this.url, e);
      if (!repeatable) throw unavailable(this.url, e.cause);
      // The server closed an idle connection as we reused it; once more on
      // a fresh one (a second failure there is a real one).
      try {
        return await this.attempt(method, path, body, timeoutMs, true, headers);
      } catch (e2) {
        throw unavailable(this.url, e2 instanceof StaleConnection ? e2.cause : e2);
      }
    }
  }

  /** Closes the idle connections (running requests finish first). */
  close(): void {
    this.agent.destroy();
  }

  private attempt(
    method: string,
    path: string,
    body: string | undefined,
    timeoutMs: number,
    fresh: boolean,
    extraHeaders: Record<string, string>,
  ): Promise<Answer> {
    const headers: Record<string, string | number> = { ...extraHeaders };
    if (body !== undefined) {
      headers["content-type"] = "application/json";
      headers["content-length"] = Buffer.byteLength(body);
    }
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    return new Promise<Answer>((resolve, reject) => {
      let settled = false;
      const settle = (err: unknown, answer?: Answer) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (err === undefined) resolve(answer!);
        else reject(err);
      };
      // The answer, once its head came: from then on its own events settle
      // the call (below), not the request's errors.
      let response: http.IncomingMessage | undefined;
      const req = this.module.request(
        {
          host: this.host,
          port: this.port,
          path: this.prefix + path,
          method,
          headers,
          // A fresh connection for the retry: not another idle one that the
          // server may have closed too.
          agent: fresh ? false : this.agent,
        },
        (res) => {
          response = res;
          // An answer before the whole request was written (a 413 after
          // the first part of a large body): the server may close the
          // connection or be left reading the rest.
          const early = !req.writableFinished;
          res.setEncoding("utf8");
          let text = "";
          res.on("data", (chunk: string) => (text += chunk));
          res.on("end", () => {
            const socket = req.socket as GuardedSocket | null;
            // Not reused after an early answer, a refused write, or a 413
            // (the server refused the body without reading all of it and
            // closes the connection, without saying so): destroyed before
            // the agent frees it (on the next tick), so not put back in
            // the pool, where the next call would find it dead.
            if (socket && (early || socket[refusedWrite] || res.statusCode === 413)) socket.destroy();
            settle(undefined, { status: res.statusCode ?? 0, text });
          });
          res.on("error", (e) => settle(e));
          res.on("aborted", () => settle(new Error("the connection closed mid-answer")));
          res.on("close", () => {
            if (!res.complete) settle(new Error("the connection closed mid-answer"));
          });
        },
      );
      // Bytes read on this connection before the request: none more when it
      // fails means the server answered nothing to this request.
      let readBefore = -1;
      req.on("socket", (s: Socket) => {
        readBefore = s.bytesRead;
        guardWrites(s);
      });
      req.on("error", (e: NodeJS.ErrnoException) => {
        // An answer has begun: a reset after it (the server closing the
        // connection it refused the rest of the request on) does not lose
        // it; the answer's 'end' or 'close' settles the call.
        if (response !== undefined) return;
        // No answer: a write the server refused is the better reason (the
        // read side then only saw the connection end).
        const socket = req.socket as GuardedSocket | null;
        const err = socket?.[refusedWrite] ?? e;
        const silent = socket !== null && socket.bytesRead === readBefore;
        if (!fresh && req.reusedSocket && silent && isStale(e)) settle(new StaleConnection(err));
        else settle(err);
      });
      const timer = setTimeout(() => {
        const e = new Error(`no answer within ${timeoutMs} ms`);
        settle(e);
        req.destroy(e);
      }, timeoutMs);
      req.end(body);
    });
  }
}

/**
 * Makes a failed write (EPIPE, ECONNRESET) leave the socket open to read
 * the answer the server sent before it closed.
 *
 * A server that refuses a request before reading all of it (a body over
 * its limit: 413 after the first ~2 MiB) answers and closes the connection;
 * the kernel resets it, and the client's next write fails while the answer
 * already waits in its receive buffer. Node destroys a socket on a write
 * error, which throws that buffer away: depending on whether the event loop
 * read it before writing again, the call saw the 413 or only `EPIPE`
 * (`Unavailable`, which says to retry). Waiting for a 'response' after the
 * error cannot help, the socket is gone by then; neither can writing the
 * body in chunks, each write can still come before the read. So the write
 * error is held back here instead: the write completes without sending
 * (and so do the writes after it), the socket keeps reading, and the call
 * ends with what the server answered, or with the end of the connection
 * when it answered nothing (then the request's 'error' handler reports the
 * held-back error). A socket with a refused write is destroyed after its
 * answer, never reused (see `attempt`).
 *
 * `_write` and `_writev` are the Writable hooks `net.Socket` implements;
 * they are wrapped once per socket (an agent reuses them). The socket also
 * gets an 'error' listener of its own, once: Node's http client drops its
 * listener when it frees a kept-alive socket and the agent adds one a tick
 * later, so an error in between (the reset that follows an early answer)
 * would otherwise be an uncaught exception. Every error still destroys the
 * socket and reaches the request's listeners while one is attached.
 */
function guardWrites(socket: Socket): void {
  const s = socket as GuardedSocket;
  if (s[guarded]) return;
  s[guarded] = true;
  s.on("error", () => {});
  const hold = (err: Error | null | undefined): Error | null | undefined => {
    if (err && WRITE_REFUSED.has((err as NodeJS.ErrnoException).code ?? "")) {
      s[refusedWrite] ??= err;
      return null;
    }
    return err;
  };
  const write = s._write;
  s._write = function (chunk, encoding, cb) {
    if (s[refusedWrite]) return cb(); // the connection is gone: nothing more is sent
    write.call(this, chunk, encoding, (err) => cb(hold(err)));
  };
  const writev = s._writev;
  if (writev) {
    s._writev = function (chunks, cb) {
      if (s[refusedWrite]) return cb();
      writev.call(this, chunks, (err) => cb(hold(err)));
    };
  }
}

class StaleConnection extends Error {
  constructor(readonly cause: Error) {
    super(cause.message);
  }
}

function isStale(e: NodeJS.ErrnoException): boolean {
  return STALE_CONNECTION.has(e.code ?? "") || e.message === "socket hang up";
}

function unavailable(url: string, e: unknown): Unavailable {
  const err = e as NodeJS.ErrnoException;
  const cause = err?.code ?? err?.message ?? String(e);
  return new Unavailable(`cannot reach Relay at ${url} (${cause}); is \`relay serve\` running there?`, "unreachable");
}
