//! Serving every port kind on one connection. An application that binds
//! several kinds to its threads (tools and a memory port, say) gets all
//! their callbacks on the connection that registered them; a managed
//! controller's application has only the one (its stdin/stdout), so it
//! must. [`PortHandlers`] holds one handler per kind and routes each
//! callback to its kind's handler, once for every way of serving.
//!
//! What must stay true: every callback read is answered exactly once; one
//! of a kind without a handler is refused at once (`invalid_request`, naming
//! the kind) rather than left to the controller's deadline.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::call;
use crate::tools::callbacks::{CAPTURE_BEGIN, CAPTURE_FINISH, TOOLS_INVOKE};
use crate::{ErrorCode, Request, Response, RpcError};

use super::serve::{ContextHandler, ToolHandler, answer};
use super::{Client, ClientError};

/// [`PortHandlers`] (tool endpoints' handler, then one per named port
/// kind), the registrations a [`Client`] keeps for [`Client::reconnect`]
/// ([`KeptPorts`]) and each named kind's SDK methods
/// (`<kind>_register`, `<kind>_unregister`, `serve_<kind>`), from the
/// one declaration of the named kinds (`crate::port_kinds!`).
macro_rules! client_ports {
    ($(
        $(#[$doc:meta])*
        $Kind:ident {
            member: $member:ident = $wire:literal,
            label: $label:literal,
            binding: { $(#[$bdoc:meta])* },
            params: $params:ty,
            register: $Reg:ident = $reg:literal, $reg_fn:ident,
            unregister: $Unreg:ident = $unreg:literal, $unreg_fn:ident,
            handler: $Handler:path, $setter:ident, $serve:ident, $answer:path, [$($cb:path),+ $(,)?],
        }
    )*) => {

        /// The handlers one connection serves its ports' callbacks with, one per
        /// kind (each optional): built with [`PortHandlers::new`] and the setters,
        /// used by [`Client::serve_callback`] and [`Client::serve_until_settled`].
        #[derive(Default)]
        pub struct PortHandlers<'a> {
            /// `tools.invoke`, `capture.begin`, `capture.finish`.
            tools: Option<&'a mut dyn ToolHandler>,
            $(
                #[doc = concat!("The ", $label, "s' callbacks.")]
                $setter: Option<&'a mut dyn $Handler>,
            )*
        }

        impl std::fmt::Debug for PortHandlers<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct("PortHandlers")
                    .field("tools", &self.tools.is_some())
                    $(.field(stringify!($setter), &self.$setter.is_some()))*
                    .finish()
            }
        }

        impl<'a> PortHandlers<'a> {
            /// No handlers yet: every callback is refused until one is set.
            pub fn new() -> PortHandlers<'a> {
                PortHandlers::default()
            }

            /// Serves tool endpoints (and their capture port) with `handler`.
            pub fn tools(mut self, handler: &'a mut dyn ToolHandler) -> PortHandlers<'a> {
                self.tools = Some(handler);
                self
            }

            $(
                #[doc = concat!("Serves ", $label, "s with `handler`.")]
                pub fn $setter(mut self, handler: &'a mut dyn $Handler) -> PortHandlers<'a> {
                    self.$setter = Some(handler);
                    self
                }
            )*

            /// The answer to one callback, from its kind's handler.
            pub(super) fn answer(&mut self, request: &Request) -> Response {
                let unserved = |kind: &str| {
                    Response::err(
                        Some(request.id.clone()),
                        RpcError::new(
                            ErrorCode::InvalidRequest,
                            format!("this connection serves no {kind} (`{}`)", request.method),
                        ),
                    )
                };
                match request.method.as_str() {
                    TOOLS_INVOKE | CAPTURE_BEGIN | CAPTURE_FINISH => match self.tools.as_deref_mut() {
                        Some(h) => answer(request, h),
                        None => unserved("tool endpoint"),
                    },
                    $(
                        $($cb)|+ => match self.$setter.as_deref_mut() {
                            Some(h) => $answer(request, h),
                            None => unserved($label),
                        },
                    )*
                    other => Response::err(Some(request.id.clone()), RpcError::method_not_found(other)),
                }
            }
        }

        /// The named ports a [`Client`] registered, by kind and name: like
        /// tool endpoints they die with their connection, so
        /// [`Client::reconnect`] registers them again.
        #[derive(Debug, Default)]
        pub(crate) struct KeptPorts {
            $(
                #[doc = concat!("The ", $label, "s registered with [`Client::", stringify!($reg_fn), "`].")]
                $member: BTreeMap<String, $params>,
            )*
        }

        impl Client {
            $(
                $(#[$doc])*
                pub fn $reg_fn(
                    &mut self,
                    port: $params,
                ) -> Result<crate::context::PortRegisterResult, ClientError> {
                    let result = self.request::<call::$Reg>(&port)?;
                    self.ports.$member.insert(port.port.clone(), port);
                    Ok(result)
                }

                #[doc = concat!("`", $unreg, "`: revokes a ", $label, " of this connection at once; \
                    `false` when it held none of that name.")]
                pub fn $unreg_fn(&mut self, port: &str) -> Result<bool, ClientError> {
                    let result = self.request::<call::$Unreg>(&crate::context::PortUnregister {
                        port: port.to_owned(),
                    })?;
                    self.ports.$member.remove(port);
                    Ok(result.revoked)
                }

                #[doc = concat!("Serves one callback of a ", $label, " with `handler`, like \
                    [`Client::serve_tools`] (any other callback is answered \"method not found\": \
                    serve each kind on its own connection, or every kind on one with \
                    [`Client::serve_callback`]).")]
                pub fn $serve(
                    &mut self,
                    handler: &mut impl $Handler,
                    timeout: Option<Duration>,
                ) -> Result<bool, ClientError> {
                    let Some(request) = self.next_callback(timeout)? else {
                        return Ok(false);
                    };
                    self.reply(&$answer(&request, handler))
                }
            )*

            /// Registers again every named port this client registered (on a
            /// new connection: [`Client::reconnect`]).
            pub(super) fn register_kept(&mut self) -> Result<(), ClientError> {
                $(
                    for port in self.ports.$member.clone().into_values() {
                        self.$reg_fn(port)?;
                    }
                )*
                Ok(())
            }
        }
    };
}

crate::port_kinds!(client_ports);

impl Client {
    /// Serves one controller callback of any kind with its kind's handler
    /// in `ports`, like [`Client::serve_tools`]: one queued while a request
    /// waited, else one read within `timeout` (`None`: wait indefinitely);
    /// `Ok(false)` when none came in time.
    pub fn serve_callback(
        &mut self,
        ports: &mut PortHandlers<'_>,
        timeout: Option<Duration>,
    ) -> Result<bool, ClientError> {
        let Some(request) = self.next_callback(timeout)? else {
            return Ok(false);
        };
        self.reply(&ports.answer(&request))
    }

    /// Serves one callback: `context.*` with `context`, tool endpoints
    /// with `tools` ([`Client::serve_callback`] with those two handlers).
    pub fn serve_ports(
        &mut self,
        tools: &mut impl ToolHandler,
        context: &mut impl ContextHandler,
        timeout: Option<Duration>,
    ) -> Result<bool, ClientError> {
        let mut ports = PortHandlers::new().tools(tools).context(context);
        self.serve_callback(&mut ports, timeout)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::client::serve::tests::req;
    use crate::client::{CallbackError, MemoryHandler};
    use crate::context::CONTEXT_PREPARE;
    use crate::memory::{MEMORY_EVIDENCE, MEMORY_SEARCH};
    use crate::memory::{MemoryCandidate, MemoryCandidates, MemoryEvidence, MemorySearch};
    use crate::tools::{ToolInvoke, ToolOutput};

    struct Tools;

    impl ToolHandler for Tools {
        fn invoke(&mut self, call: &ToolInvoke) -> Result<ToolOutput, CallbackError> {
            Ok(ToolOutput {
                text: format!("ran {}", call.tool),
                ..Default::default()
            })
        }
    }

    struct Notes;

    impl MemoryHandler for Notes {
        fn search(&mut self, call: &MemorySearch) -> Result<MemoryCandidates, CallbackError> {
            Ok(MemoryCandidates {
                candidates: vec![MemoryCandidate {
                    id: "m1".into(),
                    text: format!("about {}", call.query),
                }],
            })
        }
        fn evidence(&mut self, call: &MemoryEvidence) -> Result<MemoryCandidate, CallbackError> {
            Err(CallbackError(format!("no {}", call.id)))
        }
    }

    #[test]
    fn each_kind_reaches_its_own_handler_and_an_unserved_kind_is_refused_by_name() {
        let (mut tools, mut notes) = (Tools, Notes);
        let mut ports = PortHandlers::new().tools(&mut tools).memory(&mut notes);
        let invoke = json!({"endpoint":"crm","tool":"find","arguments":{},
            "idempotencyKey":"turn_1:call_1","threadId":"thr_1","turnId":"turn_1","callId":"call_1","mutating":false});
        let r = ports.answer(&req(TOOLS_INVOKE, invoke));
        assert_eq!(r.result.unwrap()["text"], "ran find");
        let envelope = json!({"principal":"owner","application":"app","threadId":"thr_1","workspaceId":"proj"});
        let search = json!({"port":"mem","query":"tea","envelope":envelope,"limit":5});
        let r = ports.answer(&req(MEMORY_SEARCH, search));
        assert_eq!(
            r.result.unwrap()["candidates"][0]["text"],
            "about tea",
            "memory goes to the memory handler"
        );
        let evidence = json!({"port":"mem","id":"m9","envelope":envelope});
        let r = ports.answer(&req(MEMORY_EVIDENCE, evidence));
        assert_eq!(
            r.error.unwrap().error_code(),
            Some(ErrorCode::ContextUnavailable)
        );
        let r = ports.answer(&req(CONTEXT_PREPARE, json!({})));
        let err = r.error.unwrap();
        assert_eq!(err.error_code(), Some(ErrorCode::InvalidRequest));
        assert!(err.message.contains("no context port"), "{}", err.message);
        let r = ports.answer(&req("tools.other", json!({})));
        assert!(r.error.unwrap().message.contains("unknown method"));
    }
}
