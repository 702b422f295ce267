/**
 * A small TCP proxy of the fault suite's own, on 127.0.0.1, that sits between
 * the dispatcher and the API server and misbehaves on command: it delays
 * every chunk, stalls connections (they stay open and carry nothing, as a
 * connection through a NAT that forgot it does), resets them, or refuses new
 * ones. TLS passes through untouched, so the dispatcher still verifies the API
 * server's certificate (which names 127.0.0.1 and localhost).
 *
 * @module
 */

/** What the proxy did, for the suite's report. */
export interface ProxyStats {
  /** Connections accepted. */
  connections: number;
  /** Chunks forwarded late because of `delayMs`. */
  delayed: number;
  /** Connections stalled. */
  stalled: number;
  /** Connections reset (closed under both ends mid-stream). */
  reset: number;
  /** Connections refused (closed at once) while `refuseNew` was set. */
  refused: number;
}

interface Link {
  client: Deno.Conn;
  server?: Deno.Conn;
  stalled: boolean;
  closed: boolean;
}

/**
 * A fault-injecting TCP proxy to one target.
 *
 * @example
 * ```ts
 * const proxy = FaultProxy.start("https://127.0.0.1:6443");
 * proxy.delayMs = 200; // every chunk, both ways, 200 ms late
 * proxy.stallAll(); // open connections carry nothing from now on
 * await proxy.close();
 * ```
 */
export class FaultProxy {
  /** The port the proxy listens on. */
  readonly port: number;
  /** Delay before each chunk is forwarded, in ms; 0 forwards at once. */
  delayMs = 0;
  /** Close new connections as soon as they are accepted. */
  refuseNew = false;
  /** What the proxy did. */
  readonly stats: ProxyStats = { connections: 0, delayed: 0, stalled: 0, reset: 0, refused: 0 };
  #listener: Deno.Listener;
  #target: { hostname: string; port: number };
  #links = new Set<Link>();
  #accepting: Promise<void>;

  private constructor(target: { hostname: string; port: number }) {
    this.#target = target;
    this.#listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    this.port = (this.#listener.addr as Deno.NetAddr).port;
    this.#accepting = this.#accept();
  }

  /**
   * Starts a proxy to the host and port of `server` (an `https://` URL).
   *
   * @param server the API server URL, e.g. `https://127.0.0.1:6443`
   */
  static start(server: string): FaultProxy {
    const url = new URL(server);
    return new FaultProxy({ hostname: url.hostname, port: Number(url.port || 443) });
  }

  /** The URL to give clients instead of the API server's. */
  get url(): string {
    return `https://127.0.0.1:${this.port}`;
  }

  /** Connections open now. */
  get open(): number {
    return [...this.#links].filter((l) => !l.closed).length;
  }

  /** Stalls every open connection for good: it stays open and carries nothing. Returns how many. */
  stallAll(): number {
    let n = 0;
    for (const link of this.#links) {
      if (link.closed || link.stalled) continue;
      link.stalled = true;
      n++;
    }
    this.stats.stalled += n;
    return n;
  }

  /** Closes every open connection under both ends, mid-stream. Returns how many. */
  resetAll(): number {
    let n = 0;
    for (const link of this.#links) {
      if (link.closed) continue;
      this.#shut(link);
      n++;
    }
    this.stats.reset += n;
    return n;
  }

  /** Stops listening and closes every connection. */
  async close(): Promise<void> {
    try {
      this.#listener.close();
    } catch { /* already closed */ }
    for (const link of this.#links) this.#shut(link);
    await this.#accepting;
  }

  async #accept(): Promise<void> {
    while (true) {
      let client: Deno.Conn;
      try {
        client = await this.#listener.accept();
      } catch {
        return; // closed
      }
      this.stats.connections++;
      if (this.refuseNew) {
        this.stats.refused++;
        client.close();
        continue;
      }
      this.#serve(client);
    }
  }

  async #serve(client: Deno.Conn): Promise<void> {
    const link: Link = { client, stalled: false, closed: false };
    this.#links.add(link);
    try {
      link.server = await Deno.connect(this.#target);
    } catch {
      this.#shut(link);
      return;
    }
    if (link.closed) {
      link.server.close();
      return;
    }
    await Promise.all([
      this.#pump(link, client, link.server),
      this.#pump(link, link.server, client),
    ]);
    this.#shut(link);
  }

  /** Copies `from` to `to` chunk by chunk, late when delaying, into the void when stalled. */
  async #pump(link: Link, from: Deno.Conn, to: Deno.Conn): Promise<void> {
    const buf = new Uint8Array(64 * 1024);
    try {
      while (!link.closed) {
        const n = await from.read(buf);
        if (n === null) return;
        // A stalled connection is read and dropped, so neither end sees a
        // closed or full socket: the bytes are simply lost, as on a dead path.
        if (link.stalled) continue;
        const chunk = buf.slice(0, n);
        if (this.delayMs > 0) {
          this.stats.delayed++;
          await new Promise((r) => setTimeout(r, this.delayMs));
          if (link.closed || link.stalled) continue;
        }
        let written = 0;
        while (written < chunk.length) written += await to.write(chunk.subarray(written));
      }
    } catch {
      // Either side went away; the other is closed by #serve.
    }
  }

  #shut(link: Link): void {
    if (link.closed) return;
    link.closed = true;
    this.#links.delete(link);
    for (const conn of [link.client, link.server]) {
      try {
        conn?.close();
      } catch { /* already closed */ }
    }
  }
}

/**
 * An HTTP CONNECT and SOCKS5 proxy of the suite's own on 127.0.0.1 (over TLS
 * too: an https proxy), which counts the tunnels it opens. `redirect` sends a tunnel asked for one address to
 * another: a kubeconfig whose server is a closed port then works only
 * through the proxy, so a run that succeeds proves every request went
 * through it.
 *
 * @example
 * ```ts
 * const proxy = ConnectProxy.start({ "127.0.0.1:1": "127.0.0.1:6443" });
 * // proxy-url: proxy.url
 * await proxy.close();
 * ```
 */
export class ConnectProxy {
  /** The port the proxy listens on. */
  readonly port: number;
  /** Tunnels opened, by the address asked for. */
  readonly tunnels: Record<string, number> = {};
  #listener: Deno.Listener;
  #redirect: Record<string, string>;
  #conns = new Set<Deno.Conn>();
  #accepting: Promise<void>;

  #tls: boolean;

  private constructor(redirect: Record<string, string>, tls?: { cert: string; key: string }) {
    this.#redirect = redirect;
    this.#tls = tls !== undefined;
    this.#listener = tls
      ? Deno.listenTls({ hostname: "127.0.0.1", port: 0, ...tls })
      : Deno.listen({ hostname: "127.0.0.1", port: 0 });
    this.port = (this.#listener.addr as Deno.NetAddr).port;
    this.#accepting = this.#accept();
  }

  /**
   * Starts a proxy; `redirect` maps `host:port` asked for to `host:port`
   * connected to. With `tls` (PEM) it is an https proxy: clients speak TLS
   * to the proxy itself, then, through the tunnel, TLS to the target.
   */
  static start(
    redirect: Record<string, string> = {},
    tls?: { cert: string; key: string },
  ): ConnectProxy {
    return new ConnectProxy(redirect, tls);
  }

  /** The proxy's URL, for `proxy-url`: `https://` when it speaks TLS. */
  get url(): string {
    return `${this.#tls ? "https" : "http"}://127.0.0.1:${this.port}`;
  }

  /** The same proxy's URL as a SOCKS5 proxy: it speaks both. */
  get socksUrl(): string {
    return `socks5://127.0.0.1:${this.port}`;
  }

  /** Tunnels opened in all. */
  get total(): number {
    return Object.values(this.tunnels).reduce((a, b) => a + b, 0);
  }

  /** Stops listening and closes every tunnel. */
  async close(): Promise<void> {
    try {
      this.#listener.close();
    } catch { /* already closed */ }
    for (const c of this.#conns) {
      try {
        c.close();
      } catch { /* already closed */ }
    }
    await this.#accepting;
  }

  async #accept(): Promise<void> {
    while (true) {
      let conn: Deno.Conn;
      try {
        conn = await this.#listener.accept();
      } catch {
        return;
      }
      this.#conns.add(conn);
      this.#serve(conn).catch(() => {}).finally(() => {
        this.#conns.delete(conn);
        try {
          conn.close();
        } catch { /* already closed */ }
      });
    }
  }

  async #serve(client: Deno.Conn): Promise<void> {
    const buf = new Uint8Array(8192);
    const n = await client.read(buf);
    if (n === null) return;
    // A SOCKS5 greeting starts with its version, 5; an HTTP request with a letter.
    const target = buf[0] === 5
      ? await this.#socksTarget(client, buf)
      : await this.#connectTarget(client, buf, n);
    if (!target) return;
    const to = this.#redirect[target] ?? target;
    const colon = to.lastIndexOf(":");
    let server: Deno.Conn;
    try {
      server = await Deno.connect({
        hostname: to.slice(0, colon),
        port: Number(to.slice(colon + 1)),
      });
    } catch {
      await client.write(
        buf[0] === 5
          ? new Uint8Array([5, 5, 0, 1, 0, 0, 0, 0, 0, 0])
          : new TextEncoder().encode("HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n"),
      );
      return;
    }
    this.#conns.add(server);
    this.tunnels[target] = (this.tunnels[target] ?? 0) + 1;
    await client.write(
      buf[0] === 5
        ? new Uint8Array([5, 0, 0, 1, 0, 0, 0, 0, 0, 0])
        : new TextEncoder().encode("HTTP/1.1 200 Connection Established\r\n\r\n"),
    );
    await Promise.all([
      client.readable.pipeTo(server.writable).catch(() => {}),
      server.readable.pipeTo(client.writable).catch(() => {}),
    ]);
    this.#conns.delete(server);
  }

  /** "CONNECT host:port HTTP/1.1" and headers up to a blank line. */
  async #connectTarget(client: Deno.Conn, buf: Uint8Array, n: number) {
    let head = new TextDecoder().decode(buf.subarray(0, n));
    while (!head.includes("\r\n\r\n")) {
      const more = await client.read(buf);
      if (more === null) return undefined;
      head += new TextDecoder().decode(buf.subarray(0, more));
    }
    const [method, target] = head.split(" ");
    if (method === "CONNECT") return target;
    await client.write(
      new TextEncoder().encode("HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n"),
    );
    return undefined;
  }

  /** A SOCKS5 greeting (answered: no authentication), then its CONNECT request (RFC 1928). */
  async #socksTarget(client: Deno.Conn, buf: Uint8Array) {
    await client.write(new Uint8Array([5, 0]));
    const n = await client.read(buf);
    if (n === null || buf[1] !== 1) return undefined;
    const port = (at: number) => (buf[at] << 8) | buf[at + 1];
    switch (buf[3]) {
      case 1:
        return `${buf.subarray(4, 8).join(".")}:${port(8)}`;
      case 3: {
        const len = buf[4];
        return `${new TextDecoder().decode(buf.subarray(5, 5 + len))}:${port(5 + len)}`;
      }
      default:
        return undefined; // IPv6: not needed here
    }
  }
}
