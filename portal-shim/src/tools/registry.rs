//! The program registry's tools: query and record.

use portal_proto::v1 as pb;

use super::{Shim, ToolResult, ok};
use crate::args::{QueryArgs, RecordArgs};
use crate::results::Program;

impl Shim {
    pub(super) async fn program_query(&self, a: QueryArgs) -> ToolResult {
        let p = self
            .call(None, |mut c| {
                let req = pb::ProgramQueryRequest { program: a.program.clone() };
                async move { c.program_query(req).await }
            })
            .await?;
        let program = Program::from(p);
        ok(program.query_text(), &program)
    }

    pub(super) async fn program_record(&self, a: RecordArgs) -> ToolResult {
        let p = self
            .call(None, |mut c| {
                let req = pb::ProgramRecordRequest {
                    program: a.program.clone(),
                    needs_pty: a.needs_pty,
                    notes: a.notes.clone(),
                };
                async move { c.program_record(req).await }
            })
            .await?;
        let program = Program::from(p);
        ok(program.record_text(), &program)
    }
}
