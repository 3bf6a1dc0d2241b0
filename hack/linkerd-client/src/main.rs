//! `linkerd-client`: asks an `io.linkerd.proxy.outbound.OutboundPolicies` server (interlock, or
//! Linkerd's own policy controller) for a policy with the types of Linkerd's `linkerd2-proxy-api`
//! crate, the code Linkerd's proxies decode these answers with, and prints every decoded message
//! as one line of JSON. The JSON is the crate's `Debug` form turned into JSON (field names as in
//! the crate; a oneof as `{"Variant": value}`; `Some(x)` as `x`, `None` as `null`): no
//! hand-written field list that could drift from the crate.
//!
//! Usage:
//!   linkerd-client get|watch --server HOST:PORT (--authority NAME:PORT | --addr IP:PORT)
//!                  [--source-workload JSON] [--count N]
//! A Watch prints each message as it arrives and stops after N messages (default: never); an
//! error status is printed as `{"error": {"code": ..., "message": ...}}` and exits 2.

use linkerd2_proxy_api::net::{ip_address, IpAddress, TcpAddress};
use linkerd2_proxy_api::outbound::outbound_policies_client::OutboundPoliciesClient;
use linkerd2_proxy_api::outbound::{traffic_spec, TrafficSpec};
use std::io::Write;
use std::net::{IpAddr, SocketAddr};

struct Args {
    method: String,
    server: String,
    target: traffic_spec::Target,
    source_workload: String,
    count: Option<usize>,
}

fn usage(why: &str) -> ! {
    eprintln!("linkerd-client: {why}");
    eprintln!(
        "usage: linkerd-client get|watch --server HOST:PORT (--authority NAME:PORT | --addr IP:PORT) [--source-workload JSON] [--count N]"
    );
    std::process::exit(64)
}

fn parse_args() -> Args {
    let mut argv = std::env::args().skip(1);
    let method = argv.next().unwrap_or_else(|| usage("no method"));
    if method != "get" && method != "watch" {
        usage(&format!("unknown method {method:?}"));
    }
    let (mut server, mut target, mut source_workload, mut count) = (None, None, String::new(), None);
    while let Some(flag) = argv.next() {
        let value = argv.next().unwrap_or_else(|| usage(&format!("{flag} needs a value")));
        match flag.as_str() {
            "--server" => server = Some(value),
            "--authority" => target = Some(traffic_spec::Target::Authority(value)),
            "--addr" => {
                let addr: SocketAddr =
                    value.parse().unwrap_or_else(|_| usage(&format!("--addr {value:?}: not IP:PORT")));
                target = Some(traffic_spec::Target::Addr(tcp_address(addr)));
            }
            "--source-workload" => source_workload = value,
            "--count" => {
                count = Some(value.parse().unwrap_or_else(|_| usage(&format!("--count {value:?}"))))
            }
            _ => usage(&format!("unknown flag {flag}")),
        }
    }
    Args {
        method,
        server: server.unwrap_or_else(|| usage("--server is required")),
        target: target.unwrap_or_else(|| usage("--authority or --addr is required")),
        source_workload,
        count,
    }
}

fn tcp_address(addr: SocketAddr) -> TcpAddress {
    let ip = match addr.ip() {
        IpAddr::V4(v4) => ip_address::Ip::Ipv4(u32::from(v4)),
        IpAddr::V6(v6) => {
            let bits = u128::from(v6);
            ip_address::Ip::Ipv6(linkerd2_proxy_api::net::IPv6 {
                first: (bits >> 64) as u64,
                last: bits as u64,
            })
        }
    };
    TcpAddress { ip: Some(IpAddress { ip: Some(ip) }), port: u32::from(addr.port()) }
}

fn print_line(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn print_status(status: &tonic::Status) -> ! {
    print_line(&format!(
        "{{\"error\":{{\"code\":{},\"message\":{}}}}}",
        status.code() as i32,
        debug_json::quote(status.message())
    ));
    std::process::exit(2)
}

fn print_policy(policy: &linkerd2_proxy_api::outbound::OutboundPolicy, debug: bool) {
    let text = format!("{policy:?}");
    if debug {
        eprintln!("{text}");
    }
    print_line(&debug_json::to_json(&text));
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args = parse_args();
    // LINKERD_CLIENT_DEBUG=1 prints each message's Debug form to stderr too (what the JSON is
    // made from), for when the JSON reader meets a form it does not know.
    let debug = std::env::var_os("LINKERD_CLIENT_DEBUG").is_some();
    let mut client = match OutboundPoliciesClient::connect(format!("http://{}", args.server)).await {
        Ok(client) => client,
        Err(error) => {
            eprintln!("linkerd-client: connecting to {}: {error}", args.server);
            std::process::exit(1)
        }
    };
    let spec = TrafficSpec { source_workload: args.source_workload, target: Some(args.target) };
    if args.method == "get" {
        match client.get(spec).await {
            Ok(reply) => print_policy(&reply.into_inner(), debug),
            Err(status) => print_status(&status),
        }
        return;
    }
    let mut stream = match client.watch(spec).await {
        Ok(reply) => reply.into_inner(),
        Err(status) => print_status(&status),
    };
    let mut seen = 0usize;
    loop {
        match stream.message().await {
            Ok(Some(policy)) => {
                print_policy(&policy, debug);
                seen += 1;
                if args.count.is_some_and(|count| seen >= count) {
                    return;
                }
            }
            Ok(None) => return,
            Err(status) => print_status(&status),
        }
    }
}

/// Rust's `{:?}` form of a prost message, turned into JSON.
mod debug_json {
    pub fn quote(text: &str) -> String {
        let mut out = String::with_capacity(text.len() + 2);
        out.push('"');
        for c in text.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    pub fn to_json(debug: &str) -> String {
        let mut parser = Parser { chars: debug.chars().collect(), at: 0 };
        let value = parser.value();
        parser.skip_space();
        assert!(parser.at == parser.chars.len(), "trailing text in Debug output at {}", parser.at);
        value
    }

    struct Parser {
        chars: Vec<char>,
        at: usize,
    }

    impl Parser {
        fn peek(&self) -> Option<char> {
            self.chars.get(self.at).copied()
        }

        fn skip_space(&mut self) {
            while self.peek().is_some_and(char::is_whitespace) {
                self.at += 1;
            }
        }

        fn expect(&mut self, c: char) {
            self.skip_space();
            assert_eq!(self.peek(), Some(c), "expected {c:?} at {}", self.at);
            self.at += 1;
        }

        fn eat(&mut self, c: char) -> bool {
            self.skip_space();
            if self.peek() == Some(c) {
                self.at += 1;
                return true;
            }
            false
        }

        fn value(&mut self) -> String {
            self.skip_space();
            match self.peek() {
                Some('"') => quote(&self.string()),
                Some('[') => {
                    self.at += 1;
                    let items = self.items(']', Self::value);
                    format!("[{}]", items.join(","))
                }
                Some('{') => {
                    // A map: `{"key": value, ...}` (keys are strings in these messages).
                    self.at += 1;
                    let entries = self.items('}', |p| {
                        let key = p.value();
                        p.expect(':');
                        let key = if key.starts_with('"') { key } else { quote(&key) };
                        format!("{key}:{}", p.value())
                    });
                    format!("{{{}}}", entries.join(","))
                }
                Some(c) if c == '-' || c.is_ascii_digit() => self.number(),
                Some(c) if c.is_alphabetic() || c == '_' => self.named(),
                other => panic!("unexpected {other:?} at {}", self.at),
            }
        }

        fn items(&mut self, close: char, mut item: impl FnMut(&mut Self) -> String) -> Vec<String> {
            let mut items = Vec::new();
            loop {
                if self.eat(close) {
                    return items;
                }
                items.push(item(self));
                if !self.eat(',') {
                    self.expect(close);
                    return items;
                }
            }
        }

        fn ident(&mut self) -> String {
            self.skip_space();
            let start = self.at;
            loop {
                match self.peek() {
                    // `r#match`: prost's Debug writes a raw identifier as it is spelled.
                    Some(c) if c.is_alphanumeric() || c == '_' || c == '#' => self.at += 1,
                    // A path (`a::B`), never the `:` after a field name.
                    Some(':') if self.chars.get(self.at + 1) == Some(&':') => self.at += 2,
                    _ => break,
                }
            }
            let ident: String = self.chars[start..self.at].iter().collect();
            ident.strip_prefix("r#").map(str::to_string).unwrap_or(ident)
        }

        fn named(&mut self) -> String {
            let name = self.ident();
            self.skip_space();
            match self.peek() {
                Some('{') => {
                    self.at += 1;
                    let fields = self.items('}', |p| {
                        let field = p.ident();
                        p.expect(':');
                        format!("{}:{}", quote(&field), p.value())
                    });
                    format!("{{{}}}", fields.join(","))
                }
                Some('(') => {
                    self.at += 1;
                    let mut inner = self.items(')', Self::value);
                    let inner = if inner.len() == 1 { inner.remove(0) } else { format!("[{}]", inner.join(",")) };
                    if name == "Some" {
                        inner
                    } else {
                        format!("{{{}:{inner}}}", quote(&name))
                    }
                }
                _ => match name.as_str() {
                    "None" => "null".to_string(),
                    "true" | "false" => name,
                    _ => quote(&name),
                },
            }
        }

        fn number(&mut self) -> String {
            let start = self.at;
            while self.peek().is_some_and(|c| c.is_ascii_alphanumeric() || "-+.".contains(c)) {
                self.at += 1;
            }
            self.chars[start..self.at].iter().collect()
        }

        fn string(&mut self) -> String {
            self.at += 1;
            let mut out = String::new();
            while let Some(c) = self.peek() {
                self.at += 1;
                match c {
                    '"' => return out,
                    '\\' => {
                        let escaped = self.peek().expect("escape at end");
                        self.at += 1;
                        match escaped {
                            'n' => out.push('\n'),
                            'r' => out.push('\r'),
                            't' => out.push('\t'),
                            '0' => out.push('\0'),
                            'u' => {
                                self.expect('{');
                                let start = self.at;
                                while self.peek() != Some('}') {
                                    self.at += 1;
                                }
                                let hex: String = self.chars[start..self.at].iter().collect();
                                self.at += 1;
                                out.push(char::from_u32(u32::from_str_radix(&hex, 16).unwrap()).unwrap());
                            }
                            other => out.push(other),
                        }
                    }
                    c => out.push(c),
                }
            }
            panic!("unterminated string")
        }
    }
}
