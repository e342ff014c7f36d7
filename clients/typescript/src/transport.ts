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

export class Transport {
  private readonly module: typeof http | typeof https;
  private readonly agent: http.Agent;
  private readonly host: string;
  private readonly port: number;
  private readonly prefix: string;
  /** Why `url` cannot be used, said by every call (as `fetch` did), not by the constructor. */
  private readonly unusable?: string;

  constructor(readonly url: string, private readonly token?: string) {
    let u: URL;
    try {
      u = new URL(url);
      if (u.protocol !== "http:" && u.protocol !== "https:") throw new Error(`${u.protocol} is not http: or https:`);
    } catch (e) {
      this.unusable = `not an http(s) URL: ${(e as Error).message}`;
      u = new URL("http://invalid");
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
   */
  async request(method: string, path: string, body: string | undefined, timeoutMs: number, repeatable = false): Promise<Answer> {
    if (this.unusable) throw unavailable(this.url, new Error(this.unusable));
    try {
      return await this.attempt(method, path, body, timeoutMs, false);
    } catch (e) {
      if (!(e instanceof StaleConnection)) throw unavailable(this.url, e);
      if (!repeatable) throw unavailable(this.url, e.cause);
      // The server closed an idle connection as we reused it; once more on
      // a fresh one (a second failure there is a real one).
      try {
        return await this.attempt(method, path, body, timeoutMs, true);
      } catch (e2) {
        throw unavailable(this.url, e2 instanceof StaleConnection ? e2.cause : e2);
      }
    }
  }

  /** Closes the idle connections (running requests finish first). */
  close(): void {
    this.agent.destroy();
  }

  private attempt(method: string, path: string, body: string | undefined, timeoutMs: number, fresh: boolean): Promise<Answer> {
    const headers: Record<string, string | number> = {};
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
          res.setEncoding("utf8");
          let text = "";
          res.on("data", (chunk: string) => (text += chunk));
          res.on("end", () => settle(undefined, { status: res.statusCode ?? 0, text }));
          res.on("error", (e) => settle(e));
          res.on("aborted", () => settle(new Error("the connection closed mid-answer")));
        },
      );
      // Bytes read on this connection before the request: none more when it
      // fails means the server answered nothing to this request.
      let readBefore = -1;
      req.on("socket", (s: Socket) => (readBefore = s.bytesRead));
      req.on("error", (e: NodeJS.ErrnoException) => {
        const silent = req.socket !== null && req.socket.bytesRead === readBefore;
        if (!fresh && req.reusedSocket && silent && isStale(e)) settle(new StaleConnection(e));
        else settle(e);
      });
      const timer = setTimeout(() => req.destroy(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      req.end(body);
    });
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
