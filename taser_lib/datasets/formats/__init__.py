"""Readers of the datasets only the registry names, one module per format family, all producing
`taser_lib.data.types` objects: glasgow (Cranfield, CISI), scifact, nfcorpus, answer_selection (WikiQA, TrecQA), qa
(NQ-open, WebQuestions, CuratedTREC, EntityQuestions), msmarco (MS MARCO passage's files). The generic readers
(BEIR, DPR, TREC, SQuAD) are the core's, in `taser_lib.data.formats`."""
