// Readers, dataset and tokenizers.
#include <gtest/gtest.h>

#include "biofm/data/dataset.h"
#include "biofm/data/reader.h"
#include "biofm/data/tokenizer.h"
#include "data_test_util.h"

using namespace biofm;
using namespace biofm::testing;

namespace {

std::vector<SequenceRecord> read_all(const std::string& path, const ReaderOptions& opt = {},
                                     uint64_t* skipped = nullptr) {
  SequenceReader r(path, opt);
  std::vector<SequenceRecord> out;
  SequenceRecord rec;
  while (r.next(rec)) out.push_back(rec);
  if (skipped) *skipped = r.skipped_empty();
  return out;
}

const char* kMultiLineFasta =
    ">s1 first protein\n"
    "MKV\n"
    "LLA \n"
    "\n"
    ">s2 empty\n"
    ">s3\r\n"
    "AC D*\r\n"
    ">s4\n"
    "*\n"
    ">s5 last, no newline at the end\n"
    "mkv";

}  // namespace

// ---------------------------------------------------------------- tokenizers

TEST(DataTokenizer, EsmExactIds) {
  EsmTokenizer tok;
  EXPECT_EQ(tok.encode("LAGVSERTIDPKQNFYMHWCXBUZO.-"),
            (std::vector<int32_t>{0, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
                                  22, 23, 24, 25, 26, 27, 28, 29, 30, 2}));
  // A real protein start, with lowercase and unknown residues.
  EXPECT_EQ(tok.encode("MKTAYIAK"), (std::vector<int32_t>{0, 20, 15, 11, 5, 19, 12, 5, 15, 2}));
  EXPECT_EQ(tok.encode("mktayiak"), tok.encode("MKTAYIAK"));
  std::vector<int32_t> out;
  uint64_t unk = tok.encode_residues("MJ*K1z", out);
  EXPECT_EQ(out, (std::vector<int32_t>{20, 3, 3, 15, 3, 27}));
  EXPECT_EQ(unk, 3u);
  EXPECT_EQ(tok.decode({0, 20, 32, 1, 2}), "<cls>M<mask><pad><eos>");
}

TEST(DataTokenizer, EsmVocabularyInIdOrder) {
  const auto& v = EsmTokenizer::vocab();
  ASSERT_EQ(v.size(), 33u);
  EXPECT_EQ(v[0], "<cls>");
  EXPECT_EQ(v[1], "<pad>");
  EXPECT_EQ(v[2], "<eos>");
  EXPECT_EQ(v[3], "<unk>");
  EXPECT_EQ(v[4], "L");
  EXPECT_EQ(v[28], "O");
  EXPECT_EQ(v[29], ".");
  EXPECT_EQ(v[30], "-");
  EXPECT_EQ(v[31], "<null_1>");
  EXPECT_EQ(v[32], "<mask>");
  std::string txt = EsmTokenizer::vocab_txt();
  EXPECT_EQ(txt.substr(0, 20), "<cls>\n<pad>\n<eos>\n<u");
  EXPECT_EQ(std::count(txt.begin(), txt.end(), '\n'), 33);
  for (int32_t id : {0, 1, 2, 3, 32}) EXPECT_TRUE(esm_tokenizer().is_special(id));
  for (int32_t id = 4; id < 32; ++id) EXPECT_FALSE(esm_tokenizer().is_special(id));
}

TEST(DataTokenizer, NucleotideByteIds) {
  NucleotideTokenizer tok;
  EXPECT_EQ(tok.encode("ACGTNacgt"), (std::vector<int32_t>{2, 65, 67, 71, 84, 78, 97, 99, 103, 116, 0}));
  std::vector<int32_t> out;
  EXPECT_EQ(tok.encode_residues(std::string("A\x01G", 3), out), 1u);
  EXPECT_EQ(out, (std::vector<int32_t>{65, 3, 71}));
  EXPECT_EQ(tok.decode({2, 65, 1, 0}), "<BOS>A<PAD><EOS>");
  EXPECT_EQ(tok.vocab_size(), 256);
  EXPECT_TRUE(NucleotideTokenizer::is_acgt('g'));
  EXPECT_FALSE(NucleotideTokenizer::is_acgt('N'));
  EXPECT_FALSE(NucleotideTokenizer::is_acgt(NucleotideTokenizer::kEos));
}

// ---------------------------------------------------------------- FASTA

TEST(DataReader, FastaMultiLineAndEmptyRecords) {
  TempDir dir;
  uint64_t skipped = 0;
  auto recs = read_all(dir.write("a.fasta", kMultiLineFasta), {}, &skipped);
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(recs[0].name, "s1");
  EXPECT_EQ(recs[0].sequence, "MKVLLA");
  EXPECT_EQ(recs[0].line, 1u);
  EXPECT_EQ(recs[1].name, "s3");
  EXPECT_EQ(recs[1].sequence, "ACD");  // whitespace and CR removed, trailing '*' dropped
  EXPECT_EQ(recs[1].line, 6u);
  EXPECT_EQ(recs[2].name, "s5");
  EXPECT_EQ(recs[2].sequence, "mkv");
  EXPECT_EQ(skipped, 2u);  // s2 (nothing) and s4 (only '*')

  ReaderOptions keep_stop;
  keep_stop.strip_stop = false;
  auto recs2 = read_all(dir.file("a.fasta"), keep_stop, &skipped);
  ASSERT_EQ(recs2.size(), 4u);
  EXPECT_EQ(recs2[1].sequence, "ACD*");
  EXPECT_EQ(recs2[2].sequence, "*");
}

// keep_empty (score, eval's list: a row per input record): empty records are returned in their
// place, still counted as empty, in every format; a file of empty records only is still refused.
TEST(DataReader, KeepEmptyReturnsEmptyRecordsInPlace) {
  TempDir dir;
  ReaderOptions keep;
  keep.keep_empty = true;
  uint64_t skipped = 0;
  auto recs = read_all(dir.write("a.fasta", kMultiLineFasta), keep, &skipped);
  std::vector<std::string> names, seqs;
  for (const auto& r : recs) names.push_back(r.name), seqs.push_back(r.sequence);
  EXPECT_EQ(names, (std::vector<std::string>{"s1", "s2", "s3", "s4", "s5"}));
  EXPECT_EQ(seqs, (std::vector<std::string>{"MKVLLA", "", "ACD", "", "mkv"}));
  EXPECT_EQ(skipped, 2u);
  // An empty last record (at the end of the file) too.
  recs = read_all(dir.write("end.fasta", ">x\nMK\n>y\n"), keep);
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[1].name, "y");
  EXPECT_EQ(recs[1].sequence, "");
  for (const auto& [file, text] : std::vector<std::pair<std::string, std::string>>{
           {"t.csv", "sequence\nMKV\n\"\"\nACD\n"},
           {"t.jsonl", "{\"sequence\": \"MKV\"}\n{\"sequence\": \" \"}\n{\"sequence\": \"ACD\"}\n"},
           {"t.txt", "MKV\n*\nACD\n"}}) {
    recs = read_all(dir.write(file, text), keep, &skipped);
    ASSERT_EQ(recs.size(), 3u) << file;
    EXPECT_EQ(recs[1].sequence, "") << file;
    EXPECT_EQ(recs[2].sequence, "ACD") << file;
    EXPECT_EQ(skipped, 1u) << file;
    EXPECT_EQ(read_all(dir.file(file)).size(), 2u) << file << ": skipped without keep_empty";
  }
  EXPECT_THROW(read_all(dir.write("none.fasta", ">a\n>b\n*\n"), keep), Error);
}

TEST(DataReader, FastaGzipSameAsPlain) {
  TempDir dir;
  auto plain = read_all(dir.write("a.fa", kMultiLineFasta));
  std::string gz = dir.write_gz("a.fa.gz", kMultiLineFasta);
  auto packed = read_all(gz);
  ASSERT_EQ(plain.size(), packed.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(plain[i].name, packed[i].name);
    EXPECT_EQ(plain[i].sequence, packed[i].sequence);
    EXPECT_EQ(plain[i].line, packed[i].line);
  }
  SequenceDataset ds = SequenceDataset::load(gz);
  EXPECT_EQ(ds.size(), 3u);
  EXPECT_EQ(ds.stats().skipped_empty, 2u);
  EXPECT_EQ(ds.stats().format, "fasta");
  EXPECT_EQ(ds.stats().bytes, 12u);
}

TEST(DataReader, FastaLineLongerThanReadBuffer) {
  TempDir dir;
  std::string seq(3'000'001, 'A');
  for (size_t i = 0; i < seq.size(); i += 7) seq[i] = 'C';
  std::string gz = dir.write_gz("long.fna.gz", ">chr\n" + seq + "\n>two\nACGT\n");
  SequenceDataset ds = SequenceDataset::load(gz);
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_EQ(ds.sequence(0), seq);
  EXPECT_EQ(ds.name(1), "two");
  EXPECT_EQ(ds.stats().max_length, seq.size());
  EXPECT_EQ(ds.stats().min_length, 4u);
}

TEST(DataReader, MalformedFilesNameFileAndLine) {
  std::string bad = source_path("data/bad/");
  struct Case {
    std::string file, expect;
  } cases[] = {
      {"sequence_before_header.fasta", ":3: sequence data before the first FASTA header"},
      {"header_without_name.fasta", ":3: FASTA header with no name"},
      {"empty.fasta", ": no sequences"},
      {"only_empty_records.fasta", ": no sequences (2 records with an empty sequence)"},
      {"missing_column.csv", "no column 'sequence'"},
      {"wrong_field_count.csv", ":3: expected 2 fields"},
      {"bad_line.jsonl", ":2: invalid JSON"},
      {"missing_field.jsonl", ":2: no field 'sequence' (the record has: id, seq); dataset.column / --column"},
  };
  for (const auto& c : cases) {
    std::string msg = error_of([&] { SequenceDataset::load(bad + c.file); });
    EXPECT_TRUE(contains(msg, bad + c.file)) << c.file << ": " << msg;
    EXPECT_TRUE(contains(msg, c.expect)) << c.file << ": " << msg;
  }
  std::string msg = error_of([&] { SequenceDataset::load(bad + "missing_column.csv"); });
  EXPECT_TRUE(contains(msg, "columns: 'id', 'protein', 'length'")) << msg;
}

TEST(DataReader, MissingFileAndUnknownFormat) {
  TempDir dir;
  std::string p = dir.file("nope.fasta");
  std::string msg = error_of([&] { SequenceDataset::load(p); });
  EXPECT_TRUE(contains(msg, p)) << msg;
  EXPECT_TRUE(contains(msg, "no such file")) << msg;
  msg = error_of([&] { SequenceDataset::load(dir.path.string() + "/"); });  // empty directory
  EXPECT_TRUE(contains(msg, "directory")) << msg;
  std::string odd = dir.write("seqs.xyz", "MKV\n");
  msg = error_of([&] { SequenceDataset::load(odd); });
  EXPECT_TRUE(contains(msg, odd)) << msg;
  EXPECT_TRUE(contains(msg, "extension")) << msg;
  ReaderOptions opt;
  opt.format = "text";
  EXPECT_EQ(SequenceDataset::load(odd, opt).sequence(0), "MKV");
  opt.format = "bam";
  msg = error_of([&] { SequenceDataset::load(odd, opt); });
  EXPECT_TRUE(contains(msg, "unknown sequence format 'bam'")) << msg;
  // A file that is gzip in name and magic but truncated.
  std::string gz = dir.write_gz("t.fasta.gz", std::string(">a\n") + std::string(200000, 'M') + "\n");
  std::filesystem::resize_file(gz, std::filesystem::file_size(gz) / 2);
  msg = error_of([&] { SequenceDataset::load(gz); });
  EXPECT_TRUE(contains(msg, gz)) << msg;
}

TEST(DataReader, FormatDetection) {
  EXPECT_EQ(detect_format("x/y.fasta"), SequenceFormat::Fasta);
  EXPECT_EQ(detect_format("y.FA.gz"), SequenceFormat::Fasta);
  EXPECT_EQ(detect_format("y.faa"), SequenceFormat::Fasta);
  EXPECT_EQ(detect_format("y.fna.gz"), SequenceFormat::Fasta);
  EXPECT_EQ(detect_format("y.fas"), SequenceFormat::Fasta);
  EXPECT_EQ(detect_format("y.csv.gz"), SequenceFormat::Csv);
  EXPECT_EQ(detect_format("y.jsonl"), SequenceFormat::Jsonl);
  EXPECT_EQ(detect_format("y.json"), SequenceFormat::Jsonl);
  EXPECT_EQ(detect_format("y.txt.gz"), SequenceFormat::Text);
  EXPECT_EQ(detect_format("uniprot.tsv"), SequenceFormat::Tsv);
  EXPECT_EQ(detect_format("uniprot.TAB.gz"), SequenceFormat::Tsv);
  EXPECT_EQ(detect_format("y.fasta.zst"), SequenceFormat::Fasta);
  EXPECT_EQ(detect_format("y.jsonl.zst"), SequenceFormat::Jsonl);
  EXPECT_THROW(detect_format("y.gz"), Error);
  EXPECT_THROW(detect_format("y.zst"), Error);
  EXPECT_FALSE(format_from_extension("y.md").has_value());
  EXPECT_EQ(parse_format("FASTA"), SequenceFormat::Fasta);
  EXPECT_EQ(parse_format("jsonl"), SequenceFormat::Jsonl);
  EXPECT_EQ(parse_format("tsv"), SequenceFormat::Tsv);
  EXPECT_STREQ(format_name(SequenceFormat::Tsv), "tsv");
}

// A UTF-8 byte-order mark (Windows editors write one) before the first header is not data.
TEST(DataReader, FastaStartingWithAByteOrderMark) {
  TempDir dir;
  auto recs = read_all(dir.write("bom.fasta", "\xEF\xBB\xBF>a desc\nMKV\n>b\nAC\n"));
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].name, "a");
  EXPECT_EQ(recs[0].sequence, "MKV");
  EXPECT_EQ(recs[1].sequence, "AC");
}

// ---------------------------------------------------------------- CSV

TEST(DataReader, CsvQuotingRfc4180) {
  TempDir dir;
  std::string p = dir.write("s.csv",
                            "\xEF\xBB\xBFid,sequence,note\r\n"
                            "\"p1\",\"MK\"\"V\",x\r\n"
                            "p2,\"AC\nDE\",\"a, b\"\r\n"
                            "\r\n"
                            "p3,  M K V* ,z\n"
                            "p4,,empty\n"
                            "p5,\"\",empty too\n"
                            "p6,W,last");
  ReaderOptions opt;
  opt.name_column = "id";
  uint64_t skipped = 0;
  auto recs = read_all(p, opt, &skipped);
  ASSERT_EQ(recs.size(), 4u);
  EXPECT_EQ(recs[0].name, "p1");
  EXPECT_EQ(recs[0].sequence, "MK\"V");
  EXPECT_EQ(recs[0].line, 2u);
  EXPECT_EQ(recs[1].sequence, "ACDE");  // the newline inside quotes is whitespace, stripped
  EXPECT_EQ(recs[1].line, 3u);
  EXPECT_EQ(recs[2].name, "p3");
  EXPECT_EQ(recs[2].sequence, "MKV");
  EXPECT_EQ(recs[2].line, 6u);
  EXPECT_EQ(recs[3].sequence, "W");
  EXPECT_EQ(skipped, 2u);
}

TEST(DataReader, CsvColumnChoiceAndErrors) {
  TempDir dir;
  std::string p = dir.write("s.csv", "name,seq,other\na,MKV,x\nb,LLA,y\n");
  ReaderOptions opt;
  std::string msg = error_of([&] { SequenceDataset::load(p, opt); });
  EXPECT_TRUE(contains(msg, p + ":1: no column 'sequence'")) << msg;
  EXPECT_TRUE(contains(msg, "'name', 'seq', 'other'")) << msg;
  opt.column = "seq";
  SequenceDataset ds = SequenceDataset::load(p, opt);
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_EQ(ds.sequence(1), "LLA");
  EXPECT_EQ(ds.name(1), "");
  std::string q = dir.write("q.csv", "sequence\n\"MKV\n");
  msg = error_of([&] { SequenceDataset::load(q); });
  EXPECT_TRUE(contains(msg, q + ":2: unterminated quoted CSV field")) << msg;
  std::string e = dir.write("e.csv", "");
  msg = error_of([&] { SequenceDataset::load(e); });
  EXPECT_TRUE(contains(msg, e + ": empty file")) << msg;
  std::string h = dir.write("h.csv", "id,sequence\n");
  msg = error_of([&] { SequenceDataset::load(h); });
  EXPECT_TRUE(contains(msg, h + ": no sequences")) << msg;
}

// ---------------------------------------------------------------- TSV (the CSV parser, tab-delimited)

TEST(DataReader, TsvUniprotDownload) {
  TempDir dir;
  // As UniProt's "Download > TSV" writes it: header row, "Sequence" capitalised.
  std::string p = dir.write_gz("uniprot.tsv.gz",
                               "Entry\tEntry Name\tProtein names\tLength\tSequence\n"
                               "P69905\tHBA_HUMAN\tHemoglobin subunit alpha, (Alpha-globin)\t142\tMVLSPADKTN\n"
                               "Q9XYZ1\tX_Y\t\"Quoted\tname\"\t4\t\"MK\"\"V\"\n"
                               "\n"
                               "Q0\tEMPTY\tnone\t0\t\n");
  ReaderOptions opt;
  opt.name_column = "entry";
  uint64_t skipped = 0;
  auto recs = read_all(p, opt, &skipped);
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].name, "P69905");
  EXPECT_EQ(recs[0].sequence, "MVLSPADKTN");  // the comma in a field is data, not a delimiter
  EXPECT_EQ(recs[1].sequence, "MK\"V");       // quoted field with a tab inside another one
  EXPECT_EQ(recs[1].line, 3u);
  EXPECT_EQ(skipped, 1u);
  // format: tsv on a file of another name.
  std::string q = dir.write("export.dat", "sequence\tid\nLLA\tq\n");
  opt = {};
  opt.format = "tsv";
  EXPECT_EQ(SequenceDataset::load(q, opt).sequence(0), "LLA");
  EXPECT_EQ(SequenceDataset::load(q, opt).stats().format, "tsv");
}

TEST(DataReader, TsvErrors) {
  TempDir dir;
  std::string p = dir.write("s.tsv", "id\tseq\na\tMKV\n");
  std::string msg = error_of([&] { SequenceDataset::load(p); });
  EXPECT_TRUE(contains(msg, p + ":1: no column 'sequence' in the TSV header (columns: 'id', 'seq')")) << msg;
  std::string w = dir.write("w.tab", "id\tsequence\na\tMKV\textra\n");
  msg = error_of([&] { SequenceDataset::load(w); });
  EXPECT_TRUE(contains(msg, w + ":2: expected 2 fields (as in the header), found 3")) << msg;
  std::string q = dir.write("q.tsv", "sequence\n\"MKV\n");
  msg = error_of([&] { SequenceDataset::load(q); });
  EXPECT_TRUE(contains(msg, q + ":2: unterminated quoted TSV field")) << msg;
  // Two columns that differ from the wanted name only in case: ambiguous, so no match.
  std::string a = dir.write("a.tsv", "Sequence\tSEQUENCE\nA\tB\n");
  msg = error_of([&] { SequenceDataset::load(a); });
  EXPECT_TRUE(contains(msg, "no column 'sequence'")) << msg;
  // A CSV is not read as TSV: one column holding the whole line.
  std::string c = dir.write("c.csv", "id,sequence\na,MKV\n");
  ReaderOptions opt;
  opt.format = "tsv";
  msg = error_of([&] { SequenceDataset::load(c, opt); });
  EXPECT_TRUE(contains(msg, "columns: 'id,sequence'")) << msg;
}

// ---------------------------------------------------------------- JSONL and text

TEST(DataReader, Jsonl) {
  TempDir dir;
  std::string p = dir.write("s.jsonl",
                            "{\"id\": \"a\", \"sequence\": \"MKV\", \"x\": 1}\n"
                            "\n"
                            "{\"id\": 7, \"sequence\": \"L L A\\n\"}\n"
                            "{\"id\": \"c\", \"sequence\": \"\"}\n");
  ReaderOptions opt;
  opt.name_column = "id";
  uint64_t skipped = 0;
  auto recs = read_all(p, opt, &skipped);
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].sequence, "MKV");
  EXPECT_EQ(recs[1].sequence, "LLA");
  EXPECT_EQ(recs[1].name, "7");
  EXPECT_EQ(recs[1].line, 3u);
  EXPECT_EQ(skipped, 1u);
  std::string q = dir.write("q.jsonl", "{\"sequence\": \"MKV\"}\n{\"sequence\": 5}\n");
  std::string msg = error_of([&] { SequenceDataset::load(q); });
  EXPECT_TRUE(contains(msg, q + ":2: field 'sequence' is not a string")) << msg;
  std::string r = dir.write("r.json", "[\"MKV\"]\n");
  msg = error_of([&] { SequenceDataset::load(r); });
  EXPECT_TRUE(contains(msg, r + ":1: expected a JSON object")) << msg;
}

TEST(DataReader, PlainText) {
  TempDir dir;
  std::string p = dir.write_gz("s.txt.gz", "MKV\n\n  LLA\t\nACD*\n");
  uint64_t skipped = 0;
  auto recs = read_all(p, {}, &skipped);
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(recs[1].sequence, "LLA");
  EXPECT_EQ(recs[1].line, 3u);
  EXPECT_EQ(recs[2].sequence, "ACD");
  EXPECT_EQ(skipped, 1u);
}

// ---------------------------------------------------------------- dataset

TEST(DataDataset, BundledSamples) {
  SequenceDataset prot = SequenceDataset::load(source_path("data/proteins_sample.fasta"));
  EXPECT_EQ(prot.size(), 2000u);
  EXPECT_EQ(prot.stats().skipped_empty, 0u);
  EXPECT_GE(prot.stats().min_length, 30u);
  EXPECT_LE(prot.stats().max_length, 1000u);
  EXPECT_EQ(prot.name(0), "tr|M4KW32|M4KW32_BACIU");
  EXPECT_EQ(prot.sequence(0).substr(0, 10), "MLTLENVSKT");
  uint64_t bytes = 0;
  for (uint64_t i = 0; i < prot.size(); ++i) bytes += prot.length(i);
  EXPECT_EQ(prot.stats().bytes, bytes);
  EXPECT_EQ(SequenceDataset::load(source_path("data/proteins_val.fasta")).size(), 200u);
  SequenceDataset dna = SequenceDataset::load(source_path("data/dna_sample.fasta"));
  EXPECT_EQ(dna.size(), 160u);
  EXPECT_EQ(SequenceDataset::load(source_path("data/dna_val.fasta")).size(), 20u);
  ReaderOptions opt;
  opt.max_records = 10;
  EXPECT_EQ(SequenceDataset::load(source_path("data/proteins_sample.fasta"), opt).size(), 10u);
}

TEST(DataDataset, FromSequences) {
  SequenceDataset ds = SequenceDataset::from_sequences({"MKV", "", " L A ", "*"});
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_EQ(ds.sequence(1), "LA");
  EXPECT_EQ(ds.stats().skipped_empty, 2u);
  EXPECT_EQ(ds.stats().format, "memory");
}
