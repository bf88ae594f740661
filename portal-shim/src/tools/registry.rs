//! The program registry's tools: query and record.

use portal_proto::v1 as pb;

use super::{Progress, Reply, Shim};
use crate::args::{QueryArgs, RecordArgs};
use crate::results::Program;

impl Shim {
    pub(super) async fn program_query(&self, a: QueryArgs, _: Progress) -> Reply<Program> {
        let p = self
            .call(None, |mut c| {
                let req = pb::ProgramQueryRequest { program: a.program.clone() };
                async move { c.program_query(req).await }
            })
            .await?;
        let program = Program::from(p);
        Ok((program.query_text(), program))
    }

    pub(super) async fn program_record(&self, a: RecordArgs, _: Progress) -> Reply<Program> {
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
        Ok((program.record_text(), program))
    }
}
