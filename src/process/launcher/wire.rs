//! The launcher's messages and how they cross its socket (a `SOCK_SEQPACKET` pair: one datagram
//! per message, file descriptors passed with `SCM_RIGHTS`).
//!
//! A [`Request`] goes from the daemon to the helper with the child's stdin, stdout and stderr
//! attached. [`Reply`]s come back from the helper, and an [`Reply::ExecFailed`] from the child
//! itself, before it exits. Both ends are the same binary, so the encoding is native-endian
//! and unversioned.

use std::ffi::CString;
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use nix::sys::socket::{recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags};

/// The largest request the helper accepts (argv and environment); a larger one is started by
/// the daemon itself.
pub(super) const MAX_REQUEST: usize = 128 * 1024;

/// What to start: everything `execve` and the steps before it need, resolved by the daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Request {
    /// Matches the [`Reply::Started`] to its request.
    pub id: u64,
    /// The executable's path (already looked up in `PATH`).
    pub path: CString,
    /// The arguments, the program's name first.
    pub argv: Vec<CString>,
    /// The complete environment, `KEY=value` each.
    pub envp: Vec<CString>,
    /// The working directory, when it is not the daemon's.
    pub cwd: Option<CString>,
    /// User, group and supplementary groups to switch to.
    pub run_as: Option<(u32, u32, Vec<u32>)>,
}

/// Which step before `execve` failed (in a [`Reply::ExecFailed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    /// Setting up stdin, stdout, stderr or the process group.
    Setup = 1,
    /// `chdir` to the working directory.
    Chdir = 2,
    /// Switching user and groups.
    User = 3,
    /// `execve` itself.
    Exec = 4,
}

/// What the helper (or a child that could not exec) reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reply {
    /// Request `id` runs as `pid` (forked; its exec is under way).
    Started {
        /// The request's id.
        id: u64,
        /// The child's pid, also its process group.
        pid: i32,
        /// When `fork` returned, in nanoseconds since the Unix epoch (the moment the job's
        /// process came to be, however late the daemon reads this reply).
        at: i64,
    },
    /// Request `id` could not be forked.
    ForkFailed {
        /// The request's id.
        id: u64,
        /// `fork`'s errno.
        errno: i32,
    },
    /// Child `pid` failed at `stage` and exits with 127 (sent by the child before it exits, so
    /// it always precedes that child's [`Reply::Exited`]).
    ExecFailed {
        /// The child.
        pid: i32,
        /// The failed step.
        stage: Stage,
        /// Its errno.
        errno: i32,
    },
    /// Child `pid` ended with wait status `status` (as `waitpid` gives it).
    Exited {
        /// The child.
        pid: i32,
        /// The raw wait status.
        status: i32,
    },
}

/// The size of every encoded reply.
pub(super) const REPLY_LEN: usize = 28;

impl Reply {
    /// The fixed-size encoding: tag, a u64, two i32, an i64.
    pub fn encode(self) -> [u8; REPLY_LEN] {
        let (tag, a, b, c, d): (u32, u64, i32, i32, i64) = match self {
            Reply::Started { id, pid, at } => (1, id, pid, 0, at),
            Reply::ForkFailed { id, errno } => (2, id, errno, 0, 0),
            Reply::ExecFailed { pid, stage, errno } => (3, stage as u64, pid, errno, 0),
            Reply::Exited { pid, status } => (4, 0, pid, status, 0),
        };
        let mut out = [0u8; REPLY_LEN];
        out[..4].copy_from_slice(&tag.to_ne_bytes());
        out[4..12].copy_from_slice(&a.to_ne_bytes());
        out[12..16].copy_from_slice(&b.to_ne_bytes());
        out[16..20].copy_from_slice(&c.to_ne_bytes());
        out[20..].copy_from_slice(&d.to_ne_bytes());
        out
    }

    /// The reply encoded in `bytes`, `None` when it is not one.
    pub fn decode(bytes: &[u8]) -> Option<Reply> {
        let bytes: &[u8; REPLY_LEN] = bytes.try_into().ok()?;
        let tag = u32::from_ne_bytes(bytes[..4].try_into().ok()?);
        let a = u64::from_ne_bytes(bytes[4..12].try_into().ok()?);
        let b = i32::from_ne_bytes(bytes[12..16].try_into().ok()?);
        let c = i32::from_ne_bytes(bytes[16..20].try_into().ok()?);
        let d = i64::from_ne_bytes(bytes[20..].try_into().ok()?);
        Some(match tag {
            1 => Reply::Started {
                id: a,
                pid: b,
                at: d,
            },
            2 => Reply::ForkFailed { id: a, errno: b },
            3 => Reply::ExecFailed {
                pid: b,
                stage: match a {
                    1 => Stage::Setup,
                    2 => Stage::Chdir,
                    3 => Stage::User,
                    _ => Stage::Exec,
                },
                errno: c,
            },
            4 => Reply::Exited { pid: b, status: c },
            _ => return None,
        })
    }
}

impl Request {
    /// Length-prefixed fields: id, path, argv, envp, cwd, then user, group and groups.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(&self.id.to_ne_bytes());
        put_bytes(&mut out, self.path.as_bytes());
        put_list(&mut out, &self.argv);
        put_list(&mut out, &self.envp);
        put_list(&mut out, self.cwd.as_slice());
        match &self.run_as {
            Some((uid, gid, groups)) => {
                put_u32(&mut out, 1);
                put_u32(&mut out, *uid);
                put_u32(&mut out, *gid);
                put_u32(&mut out, u32::try_from(groups.len()).unwrap_or(u32::MAX));
                groups.iter().for_each(|g| put_u32(&mut out, *g));
            }
            None => put_u32(&mut out, 0),
        }
        out
    }

    /// The request encoded in `bytes`, `None` when it is malformed.
    pub fn decode(bytes: &[u8]) -> Option<Request> {
        let mut r = Reader(bytes);
        let id = u64::from_ne_bytes(r.take(8)?.try_into().ok()?);
        let path = CString::new(r.bytes()?).ok()?;
        let argv = r.list()?;
        let envp = r.list()?;
        let cwd = r.list()?.into_iter().next();
        let run_as = match r.u32()? {
            0 => None,
            _ => {
                let (uid, gid, count) = (r.u32()?, r.u32()?, r.u32()?);
                let groups = (0..count).map(|_| r.u32()).collect::<Option<Vec<_>>>()?;
                Some((uid, gid, groups))
            }
        };
        Some(Request {
            id,
            path,
            argv,
            envp,
            cwd,
            run_as,
        })
    }
}

fn put_u32(out: &mut Vec<u8>, value: u32) {
    out.extend_from_slice(&value.to_ne_bytes());
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_u32(out, u32::try_from(bytes.len()).unwrap_or(u32::MAX));
    out.extend_from_slice(bytes);
}

fn put_list(out: &mut Vec<u8>, items: &[CString]) {
    put_u32(out, u32::try_from(items.len()).unwrap_or(u32::MAX));
    items
        .iter()
        .for_each(|item| put_bytes(out, item.as_bytes()));
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_ne_bytes(self.take(4)?.try_into().ok()?))
    }

    fn bytes(&mut self) -> Option<Vec<u8>> {
        let len = usize::try_from(self.u32()?).ok()?;
        Some(self.take(len)?.to_vec())
    }

    fn list(&mut self) -> Option<Vec<CString>> {
        let count = self.u32()?;
        (0..count)
            .map(|_| CString::new(self.bytes()?).ok())
            .collect()
    }
}

/// Sends one message with `fds` attached.
pub(super) fn send(sock: BorrowedFd<'_>, bytes: &[u8], fds: &[RawFd]) -> nix::Result<()> {
    let iov = [IoSlice::new(bytes)];
    let rights = [ControlMessage::ScmRights(fds)];
    let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &rights };
    sendmsg::<()>(sock.as_raw_fd(), &iov, cmsgs, MsgFlags::MSG_NOSIGNAL, None).map(drop)
}

/// Receives one message into `buf`: its length (0 at the end of the stream) and the file
/// descriptors that came with it (close-on-exec). A message longer than `buf` is an error.
pub(super) fn receive(
    sock: BorrowedFd<'_>,
    buf: &mut [u8],
    flags: MsgFlags,
) -> nix::Result<(usize, Vec<OwnedFd>)> {
    let mut space = nix::cmsg_space!([RawFd; 3]);
    let mut iov = [IoSliceMut::new(buf)];
    let msg = recvmsg::<()>(
        sock.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        flags | MsgFlags::MSG_CMSG_CLOEXEC,
    )?;
    let mut fds = Vec::new();
    for cmsg in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(received) = cmsg {
            // SAFETY: the kernel just installed these descriptors in this process for us.
            fds.extend(
                received
                    .into_iter()
                    .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
            );
        }
    }
    if msg
        .flags
        .intersects(MsgFlags::MSG_TRUNC | MsgFlags::MSG_CTRUNC)
    {
        return Err(nix::errno::Errno::EMSGSIZE);
    }
    Ok((msg.bytes, fds))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> CString {
        CString::new(s).expect("no NUL")
    }

    #[test]
    fn requests_and_replies_survive_the_encoding() {
        let request = Request {
            id: 7,
            path: c("/bin/echo"),
            argv: vec![c("echo"), c("a b"), c("")],
            envp: vec![c("HOME=/root"), c("X=")],
            cwd: Some(c("/tmp")),
            run_as: Some((1000, 100, vec![100, 27])),
        };
        assert_eq!(Request::decode(&request.encode()), Some(request.clone()));
        let plain = Request {
            cwd: None,
            run_as: None,
            ..request
        };
        let bytes = plain.encode();
        assert_eq!(Request::decode(&bytes), Some(plain));
        assert_eq!(Request::decode(&bytes[..bytes.len() - 1]), None);
        for reply in [
            Reply::Started {
                id: 9,
                pid: 42,
                at: 1_790_000_000_123_456_789,
            },
            Reply::ForkFailed { id: 9, errno: 11 },
            Reply::ExecFailed {
                pid: 42,
                stage: Stage::Chdir,
                errno: 2,
            },
            Reply::Exited {
                pid: 42,
                status: 256,
            },
        ] {
            assert_eq!(Reply::decode(&reply.encode()), Some(reply));
        }
        assert_eq!(Reply::decode(&[0; 3]), None);
    }
}
