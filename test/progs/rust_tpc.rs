//! rust_tpc: a tally server in Rust, a thread per connection, for cmc to check.
//!
//!     rust_tpc PORT [--wait-ms MS]
//!
//! Plain std (no crates; builds with rustc 1.63): a std::net::TcpListener whose
//! accept loop spawns a thread (std::thread::spawn) for every connection; the tally
//! they share is an Arc<(Mutex<Tally>, Condvar)>. Each line a client sends is a
//! request and gets one line back:
//!
//!     ADD n     the total goes up by n; answer "TOTAL t", t the new total
//!     AWAIT k   wait, at most MS milliseconds (default 2000), until the total is at
//!               least k (Condvar::wait_timeout_while); answer "REACHED t" when it is,
//!               "TIMEOUT t" when the time ran out first. With --wait-ms 0 the wait
//!               has no time limit (Condvar::wait_while).
//!
//! Under cmc an AWAIT's wait is a futex wait with a timeout: its FIRE is the time
//! running out. An ADD wakes every waiter (notify_all), which looks at the total and
//! waits again for the rest of its time (under cmc: all of it, since the clock only
//! moves on a FIRE).
//!
//! State on fd 3 (a JSON line after every change, written under the lock):
//!     {"total": t, "waiting": w, "timeouts": n}
//! w: the AWAITs being waited on; n: those whose time ran out.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::io::FromRawFd;
use std::process;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

struct Tally {
    total: u64,
    waiting: u32,
    timeouts: u32,
    state: File,
}

impl Tally {
    fn emit(&mut self) {
        let line = format!(
            "{{\"total\":{},\"waiting\":{},\"timeouts\":{}}}\n",
            self.total, self.waiting, self.timeouts
        );
        if let Err(err) = self.state.write_all(line.as_bytes()) {
            eprintln!("rust_tpc: write fd 3: {}", err);
        }
    }
}

type Shared = Arc<(Mutex<Tally>, Condvar)>;

fn answer(shared: &Shared, request: &str, wait: Option<Duration>) -> String {
    let mut words = request.split_whitespace();
    let verb = words.next().unwrap_or("");
    let n = match words.next().map(str::parse::<u64>) {
        Some(Ok(n)) => n,
        _ => return "ERROR".to_string(),
    };
    let (lock, moved) = &**shared;
    let mut tally = lock.lock().unwrap();
    match verb {
        "ADD" => {
            tally.total += n;
            tally.emit();
            moved.notify_all();
            format!("TOTAL {}", tally.total)
        }
        "AWAIT" if tally.total >= n => format!("REACHED {}", tally.total),
        "AWAIT" => {
            tally.waiting += 1;
            tally.emit();
            let (mut tally, timed_out) = match wait {
                Some(wait) => {
                    let (tally, result) = moved
                        .wait_timeout_while(tally, wait, |t| t.total < n)
                        .unwrap();
                    (tally, result.timed_out())
                }
                None => (moved.wait_while(tally, |t| t.total < n).unwrap(), false),
            };
            tally.waiting -= 1;
            let reply = if timed_out {
                tally.timeouts += 1;
                format!("TIMEOUT {}", tally.total)
            } else {
                format!("REACHED {}", tally.total)
            };
            tally.emit();
            reply
        }
        _ => "ERROR".to_string(),
    }
}

fn serve(stream: TcpStream, shared: Shared, wait: Option<Duration>) {
    let mut out = match stream.try_clone() {
        Ok(out) => out,
        Err(err) => {
            eprintln!("rust_tpc: try_clone: {}", err);
            return;
        }
    };
    for line in BufReader::new(stream).lines() {
        let request = match line {
            Ok(request) => request,
            Err(_) => return, // a reset
        };
        let reply = answer(&shared, &request, wait);
        if out.write_all(format!("{}\n", reply).as_bytes()).is_err() {
            return;
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 2 {
        eprintln!("usage: rust_tpc PORT [--wait-ms MS]");
        process::exit(2);
    }
    let port: u16 = args[1].parse().unwrap_or_else(|_| {
        eprintln!("rust_tpc: bad port {:?}", args[1]);
        process::exit(2)
    });
    let mut wait_ms = 2000;
    if let Some(i) = args.iter().position(|a| a == "--wait-ms") {
        wait_ms = args.get(i + 1).and_then(|v| v.parse().ok()).unwrap_or_else(|| {
            eprintln!("rust_tpc: --wait-ms needs a number of milliseconds");
            process::exit(2)
        });
    }
    let wait = if wait_ms > 0 { Some(Duration::from_millis(wait_ms)) } else { None };

    // fd 3 is cmc's: the canonical state. Only this File writes it.
    let state = unsafe { File::from_raw_fd(3) };
    let tally = Tally { total: 0, waiting: 0, timeouts: 0, state };
    let shared: Shared = Arc::new((Mutex::new(tally), Condvar::new()));
    shared.0.lock().unwrap().emit();

    let listener = TcpListener::bind(("127.0.0.1", port)).unwrap_or_else(|err| {
        eprintln!("rust_tpc: listen on port {}: {}", port, err);
        process::exit(1)
    });
    for stream in listener.incoming() {
        match stream {
            Ok(stream) => {
                let shared = Arc::clone(&shared);
                thread::spawn(move || serve(stream, shared, wait));
            }
            Err(err) => eprintln!("rust_tpc: accept: {}", err),
        }
    }
}
