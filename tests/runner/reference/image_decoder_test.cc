// Tests of ImageDecoder (runner/reference/image_decode*): every format
// against the pixels its encoder's reader gives (testdata/images), the
// three pixel formats, streams written here byte by byte (BMP and PNM
// variants), truncated, corrupt and oversized streams.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/tensor/npy.h"
#include "runner/convert.h"
#include "runner/reference/image_decode.h"
#include "tests/util/model_builder.h"
#include "tests/util/run_graph.h"
#include "tests/util/tensors.h"
#include "tests/util/test_paths.h"

namespace onnxkit::testing {
namespace {

using runner::Tensor;
namespace image = runner::reference::image;

std::vector<uint8_t> ReadBytes(const std::string& name) {
  std::ifstream in(TestdataPath("images/" + name), std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  const std::string text = s.str();
  return {text.begin(), text.end()};
}

// An expected image (.npy) as [H, W, C] bytes.
Tensor ReadExpected(const std::string& name) {
  const std::vector<uint8_t> bytes = ReadBytes(name);
  auto proto =
      tensor::ReadNpy(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), name);
  EXPECT_TRUE(proto.ok()) << name << ": " << proto.status();
  if (!proto.ok()) return Tensor();
  auto t = runner::TensorFromProto(*proto);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : Tensor();
}

Tensor Stream(const std::vector<uint8_t>& bytes) {
  return MakeTensor<uint8_t>(pb::kUint8, {static_cast<int64_t>(bytes.size())}, bytes);
}
Tensor Stream(const std::string& bytes) { return Stream(std::vector<uint8_t>(bytes.begin(), bytes.end())); }

absl::StatusOr<Tensor> Decode(const Tensor& stream, const std::string& format = "RGB",
                              runner::Backend backend = runner::Backend::kReference) {
  auto out =
      RunNodeOn(backend, "ImageDecoder", {stream}, {AttrString("pixel_format", format)}, 20, 1, "", {});
  if (!out.ok()) return out.status();
  if (!(*out)[0].is_tensor()) return absl::InternalError("not a tensor");
  return (*out)[0].tensor();
}

std::vector<uint8_t> Pixels(const Tensor& t) { return {t.data<uint8_t>(), t.data<uint8_t>() + t.size()}; }

void ExpectImage(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dtype(), pb::kUint8) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const std::vector<uint8_t> a = Pixels(got), b = Pixels(want);
  int differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i];
  EXPECT_EQ(differ, 0) << what << ": " << differ << " of " << a.size() << " samples differ";
}

TEST(ImageDecoderTest, SuiteStreamsDecodeToTheSuitesPixels) {
  const Tensor lossless = ReadExpected("sample_rgb.npy");
  for (const char* name : {"sample.bmp", "sample.jp2", "sample.png", "sample.ppm", "sample.tif"}) {
    auto got = Decode(Stream(ReadBytes(name)));
    ASSERT_TRUE(got.ok()) << name << ": " << got.status();
    ExpectImage(*got, lossless, name);
  }
  auto jpg = Decode(Stream(ReadBytes("sample.jpg")));
  ASSERT_TRUE(jpg.ok()) << jpg.status();
  ExpectImage(*jpg, ReadExpected("sample_jpg_rgb.npy"), "sample.jpg");
  auto webp = Decode(Stream(ReadBytes("sample.webp")));
  ASSERT_TRUE(webp.ok()) << webp.status();
  ExpectImage(*webp, ReadExpected("sample_webp_rgb.npy"), "sample.webp");
  auto gray = Decode(Stream(ReadBytes("sample.jpg")), "Grayscale");
  ASSERT_TRUE(gray.ok()) << gray.status();
  ExpectImage(*gray, ReadExpected("sample_jpg_grayscale.npy"), "sample.jpg as Grayscale");
}

TEST(ImageDecoderTest, BgrIsRgbReversedOnEveryBackend) {
  const Tensor stream = Stream(ReadBytes("sample.jpg"));
  auto rgb = Decode(stream);
  auto bgr = Decode(stream, "BGR");
  auto cpu = Decode(stream, "BGR", runner::Backend::kCpu);
  ASSERT_TRUE(rgb.ok() && bgr.ok() && cpu.ok());
  ASSERT_EQ(bgr->shape(), rgb->shape());
  const std::vector<uint8_t> a = Pixels(*rgb), b = Pixels(*bgr);
  for (size_t i = 0; i < a.size(); i += 3) {
    ASSERT_EQ(b[i], a[i + 2]) << i;
    ASSERT_EQ(b[i + 1], a[i + 1]) << i;
    ASSERT_EQ(b[i + 2], a[i]) << i;
  }
  EXPECT_EQ(Pixels(*cpu), b);
}

// Streams that take the codecs' other paths, against their writer's reader.
TEST(ImageDecoderTest, OtherLayoutsMatchTheirWritersReader) {
  for (const char* name : {"cmyk.jpg", "progressive.jpg", "palette_alpha.png", "gray_alpha.png",
                           "rgba_lzw.tif", "palette.tif", "rgba_lossless.webp"}) {
    std::string expected = std::string(name);
    expected[expected.find('.')] = '_';
    auto got = Decode(Stream(ReadBytes(name)));
    ASSERT_TRUE(got.ok()) << name << ": " << got.status();
    ExpectImage(*got, ReadExpected(expected + "_rgb.npy"), name);
  }
  // Alpha is dropped, not composited, and does not enter the gray value.
  auto gray = Decode(Stream(ReadBytes("rgba_lzw.tif")), "Grayscale");
  ASSERT_TRUE(gray.ok()) << gray.status();
  ExpectImage(*gray, ReadExpected("rgba_gray.npy"), "rgba_lzw.tif as Grayscale");
  auto g16 = Decode(Stream(ReadBytes("gray16.png")), "Grayscale");
  ASSERT_TRUE(g16.ok()) << g16.status();
  ExpectImage(*g16, ReadExpected("gray16_png_gray.npy"), "gray16.png");
}

TEST(ImageDecoderTest, GrayscaleUsesRec601WeightsInFixedPoint) {
  // Red, green, blue, white, and a mid gray, as a P3 stream.
  auto got = Decode(Stream(std::string("P3\n5 1\n255\n255 0 0  0 255 0  0 0 255  255 255 255  90 90 90\n")),
                    "Grayscale");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->shape(), (std::vector<int64_t>{1, 5, 1}));
  EXPECT_EQ(Pixels(*got), (std::vector<uint8_t>{76, 150, 29, 255, 90}));
  // A gray source is repeated into three channels.
  auto rgb = Decode(Stream(std::string("P2 2 1 255 7 200\n")));
  ASSERT_TRUE(rgb.ok()) << rgb.status();
  EXPECT_EQ(Pixels(*rgb), (std::vector<uint8_t>{7, 7, 7, 200, 200, 200}));
}

TEST(ImageDecoderTest, PnmVariants) {
  // P1: comments, and digits that touch; 1 is black.
  auto p1 = Decode(Stream(std::string("P1\n# a comment\n3 2\n101\n0 1 0\n")), "Grayscale");
  ASSERT_TRUE(p1.ok()) << p1.status();
  EXPECT_EQ(Pixels(*p1), (std::vector<uint8_t>{0, 255, 0, 255, 0, 255}));
  // P2 with maxval 15 scales to 0..255, rounding.
  auto p2 = Decode(Stream(std::string("P2 3 1 15 0 7 15\n")), "Grayscale");
  ASSERT_TRUE(p2.ok()) << p2.status();
  EXPECT_EQ(Pixels(*p2), (std::vector<uint8_t>{0, 119, 255}));
  // P4: rows padded to a byte (width 10).
  std::string p4 = "P4 10 2\n";
  p4 += {static_cast<char>(0xB3), static_cast<char>(0xC0), static_cast<char>(0x55), static_cast<char>(0x40)};
  auto bits = Decode(Stream(p4), "Grayscale");
  ASSERT_TRUE(bits.ok()) << bits.status();
  EXPECT_EQ(Pixels(*bits), (std::vector<uint8_t>{0,   255, 0,   0, 255, 255, 0,   0, 0,   0,  //
                                                 255, 0,   255, 0, 255, 0,   255, 0, 255, 0}));
  // P5 with 16-bit big-endian samples.
  std::string p5 = "P5 2 1 65535\n";
  p5 += {0x12, 0x34, static_cast<char>(0xFF), static_cast<char>(0xFF)};
  auto wide = Decode(Stream(p5), "Grayscale");
  ASSERT_TRUE(wide.ok()) << wide.status();
  EXPECT_EQ(Pixels(*wide), (std::vector<uint8_t>{18, 255}));
  // P6 with maxval 100.
  std::string p6 = "P6 1 1 100\n";
  p6 += {0, 50, 100};
  auto color = Decode(Stream(p6));
  ASSERT_TRUE(color.ok()) << color.status();
  EXPECT_EQ(Pixels(*color), (std::vector<uint8_t>{0, 128, 255}));
}

// A BMP file: file header, a BITMAPINFOHEADER (40 bytes) or larger, extra
// header bytes (masks), the palette (RGB triples), then `data`.
std::vector<uint8_t> Bmp(int32_t width, int32_t height, uint16_t bpp, uint32_t compression,
                         const std::vector<uint8_t>& palette, const std::vector<uint8_t>& data,
                         const std::vector<uint32_t>& masks = {}, uint32_t header = 40) {
  std::vector<uint8_t> b;
  auto u16 = [&](uint32_t v) {
    b.push_back(v & 255);
    b.push_back((v >> 8) & 255);
  };
  auto u32 = [&](uint32_t v) {
    u16(v & 0xFFFF);
    u16(v >> 16);
  };
  const uint32_t colors = static_cast<uint32_t>(palette.size() / 3);
  const uint32_t mask_bytes = header == 40 ? 4 * static_cast<uint32_t>(masks.size()) : 0;
  const uint32_t offset = 14 + header + mask_bytes + 4 * colors;
  b.push_back('B');
  b.push_back('M');
  u32(offset + static_cast<uint32_t>(data.size()));
  u32(0);
  u32(offset);
  u32(header);
  u32(static_cast<uint32_t>(width));
  u32(static_cast<uint32_t>(height));
  u16(1);
  u16(bpp);
  u32(compression);
  u32(static_cast<uint32_t>(data.size()));
  u32(2835);
  u32(2835);
  u32(colors);
  u32(0);
  for (uint32_t m : masks) u32(m);
  while (b.size() < 14 + header + mask_bytes) b.push_back(0);
  for (uint32_t i = 0; i < colors; ++i) {
    b.push_back(palette[3 * i + 2]);
    b.push_back(palette[3 * i + 1]);
    b.push_back(palette[3 * i]);
    b.push_back(0);
  }
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

const std::vector<uint8_t> kPalette = {255, 0, 0, 0, 255, 0, 0, 0, 255, 9, 99, 199};

std::vector<uint8_t> Colors(const std::vector<int>& indices) {
  std::vector<uint8_t> out;
  for (int i : indices) {
    for (size_t c = 0; c < 3; ++c) out.push_back(kPalette[3 * static_cast<size_t>(i) + c]);
  }
  return out;
}

TEST(ImageDecoderTest, BmpPaletteAndRunLengthForms) {
  // 1 bit, width 3 (rows padded to 4 bytes), stored bottom up.
  auto one =
      Decode(Stream(Bmp(3, 2, 1, 0, {0, 0, 0, 255, 255, 255}, {0xA0, 0, 0, 0, 0x40, 0, 0, 0})), "Grayscale");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(Pixels(*one), (std::vector<uint8_t>{0, 255, 0, 255, 0, 255}));
  // RLE8: a run, an end of line, a three-pixel literal run (padded), a
  // delta that skips a pixel, a run, an end of bitmap. Pixels no code
  // reaches have palette index 0.
  const std::vector<uint8_t> rle8 = {3, 1, 0, 0, 0, 3, 2, 3, 0, 0, 0, 0, 0, 2, 1, 0, 2, 0, 0, 1};
  auto r8 = Decode(Stream(Bmp(4, 3, 8, 1, kPalette, rle8)));
  ASSERT_TRUE(r8.ok()) << r8.status();
  // Stored rows: 0 (bottom) = 1 1 1 .; 1 = 2 3 0 .; 2 (top) = . 0 0 .
  EXPECT_EQ(Pixels(*r8), Colors({0, 0, 0, 0, 2, 3, 0, 0, 1, 1, 1, 0}));
  // RLE4: a run of alternating nibbles, an end of line, a literal run.
  const std::vector<uint8_t> rle4 = {5, 0x12, 0, 0, 0, 4, 0x30, 0x21, 0, 1};
  auto r4 = Decode(Stream(Bmp(5, 2, 4, 2, kPalette, rle4)));
  ASSERT_TRUE(r4.ok()) << r4.status();
  EXPECT_EQ(Pixels(*r4), Colors({3, 0, 2, 1, 0, 1, 2, 1, 2, 1}));
}

TEST(ImageDecoderTest, BmpBitFieldsAndAlpha) {
  // 16 bits, 5-6-5 fields, top down (negative height), rows padded.
  const std::vector<uint8_t> d16 = {0x00, 0xF8, 0xE0, 0x07, 0x1F, 0x00, 0, 0,
                                    0xFF, 0xFF, 0x10, 0x84, 0,    0,    0, 0};
  auto f565 = Decode(Stream(Bmp(3, -2, 16, 3, {}, d16, {0xF800, 0x07E0, 0x001F})));
  ASSERT_TRUE(f565.ok()) << f565.status();
  EXPECT_EQ(Pixels(*f565), (std::vector<uint8_t>{255, 0, 0, 0, 255, 0, 0, 0, 255,  //
                                                 255, 255, 255, 131, 129, 131, 0, 0, 0}));
  // 32 bits with an alpha mask in a V5 header: alpha is dropped.
  const std::vector<uint8_t> d32 = {10, 20, 30, 0, 40, 50, 60, 255};
  const auto v5 = Bmp(2, 1, 32, 3, {}, d32, {0x00FF0000, 0x0000FF00, 0x000000FF, 0xFF000000}, 124);
  auto raw = image::DecodeRaw(v5);
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_EQ(raw->channels, 4);
  auto rgb = Decode(Stream(v5));
  ASSERT_TRUE(rgb.ok()) << rgb.status();
  EXPECT_EQ(Pixels(*rgb), (std::vector<uint8_t>{30, 20, 10, 60, 50, 40}));
}

// sample.jpg with the size in its frame header (SOF0 or SOF2: length,
// precision, height, width) replaced; its scan data stays 32 x 32's.
std::vector<uint8_t> JpegClaiming(uint16_t height, uint16_t width) {
  std::vector<uint8_t> jpg = ReadBytes("sample.jpg");
  for (size_t i = 2; i + 9 < jpg.size() && jpg[i] == 0xFF;) {
    if (jpg[i + 1] == 0xC0 || jpg[i + 1] == 0xC2) {
      jpg[i + 5] = static_cast<uint8_t>(height >> 8);
      jpg[i + 6] = static_cast<uint8_t>(height & 255);
      jpg[i + 7] = static_cast<uint8_t>(width >> 8);
      jpg[i + 8] = static_cast<uint8_t>(width & 255);
      return jpg;
    }
    i += 2 + (size_t{jpg[i + 2]} << 8 | jpg[i + 3]);
  }
  ADD_FAILURE() << "no frame header in sample.jpg";
  return jpg;
}

// The spec's answer to a stream it cannot decode is an empty image.
TEST(ImageDecoderTest, TruncatedAndCorruptStreamsGiveEmptyImages) {
  for (const char* name :
       {"sample.bmp", "sample.jp2", "sample.jpg", "sample.png", "sample.ppm", "sample.tif", "sample.webp",
        "cmyk.jpg", "progressive.jpg", "palette.tif", "rgba_lossless.webp"}) {
    const std::vector<uint8_t> whole = ReadBytes(name);
    ASSERT_FALSE(whole.empty()) << name;
    for (size_t keep : {size_t{0}, size_t{1}, size_t{3}, size_t{12}, whole.size() / 4, whole.size() / 2}) {
      const std::vector<uint8_t> part(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(keep));
      for (const char* format : {"RGB", "Grayscale"}) {
        auto got = Decode(Stream(part), format);
        ASSERT_TRUE(got.ok()) << name << " cut to " << keep << ": " << got.status();
        const int64_t c = std::string(format) == "RGB" ? 3 : 1;
        EXPECT_EQ(got->shape(), (std::vector<int64_t>{0, 0, c})) << name << " cut to " << keep;
      }
      auto raw = image::DecodeRaw(part);
      EXPECT_TRUE(absl::IsDataLoss(raw.status())) << name << " cut to " << keep << ": " << raw.status();
    }
  }
  // A header that claims more than the scan holds stops where the data
  // does, instead of decoding gray to the end of 16000 x 16000 pixels.
  auto claims = Decode(Stream(JpegClaiming(16000, 16000)));
  ASSERT_TRUE(claims.ok()) << claims.status();
  EXPECT_EQ(claims->shape(), (std::vector<int64_t>{0, 0, 3}));
  auto text = Decode(Stream(std::string("not an image at all")));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->shape(), (std::vector<int64_t>{0, 0, 3}));
  // A BMP whose palette index points past its palette gives black there.
  auto past = Decode(Stream(Bmp(1, 1, 8, 0, {1, 2, 3}, {5, 0, 0, 0})));
  ASSERT_TRUE(past.ok()) << past.status();
  EXPECT_EQ(Pixels(*past), (std::vector<uint8_t>{0, 0, 0}));
}

// Oversized images are refused before their pixels are allocated, by every
// decoder: an error, not an empty image.
TEST(ImageDecoderTest, ImagesPastTheLimitAreRefused) {
  for (const char* name :
       {"sample.bmp", "sample.jp2", "sample.jpg", "sample.png", "sample.ppm", "sample.tif", "sample.webp"}) {
    auto raw = image::DecodeRaw(ReadBytes(name), 32 * 31);
    EXPECT_TRUE(absl::IsResourceExhausted(raw.status())) << name << ": " << raw.status();
    EXPECT_TRUE(image::DecodeRaw(ReadBytes(name), 3 * 32 * 32).ok()) << name;
  }
  // JPEG 2000 is decoded as one 32-bit plane per component: the limit
  // counts its samples.
  auto planes = image::DecodeRaw(ReadBytes("sample.jp2"), 32 * 32);
  EXPECT_TRUE(absl::IsResourceExhausted(planes.status())) << planes.status();
  EXPECT_NE(planes.status().message().find("3 components"), std::string::npos) << planes.status();
  // A BMP header of 100000 x 100000 pixels, and a JPEG frame of 32767 x
  // 32767, under the default limit.
  auto bmp = Decode(Stream(Bmp(100000, 100000, 24, 0, {}, {1, 2, 3})));
  ASSERT_FALSE(bmp.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(bmp.status())) << bmp.status();
  EXPECT_NE(bmp.status().message().find("limit"), std::string::npos) << bmp.status();
  const std::vector<uint8_t> jpg = JpegClaiming(32767, 32767);  // libjpeg's own limit is 65500
  auto big = Decode(Stream(jpg));
  ASSERT_FALSE(big.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(big.status())) << big.status();
}

TEST(ImageDecoderTest, BadInputsAndAttributesAreErrors) {
  auto fmt = Decode(Stream(ReadBytes("sample.png")), "RGBA");
  ASSERT_FALSE(fmt.ok());
  EXPECT_NE(fmt.status().message().find("pixel_format"), std::string::npos) << fmt.status();
  const Tensor two_d = MakeTensor<uint8_t>(pb::kUint8, {2, 2}, {'B', 'M', 0, 0});
  auto rank = Decode(two_d);
  ASSERT_FALSE(rank.ok());
  EXPECT_NE(rank.status().message().find("1-D uint8"), std::string::npos) << rank.status();
}

TEST(ImageDecoderTest, FormatsAreToldBySignature) {
  EXPECT_EQ(image::DetectFormat(ReadBytes("sample.jp2")), image::ImageFormat::kJpeg2000);
  EXPECT_EQ(image::DetectFormat(ReadBytes("sample.webp")), image::ImageFormat::kWebp);
  EXPECT_EQ(image::DetectFormat(ReadBytes("sample.tif")), image::ImageFormat::kTiff);
  const std::vector<uint8_t> codestream = {0xFF, 0x4F, 0xFF, 0x51, 0, 0};
  EXPECT_EQ(image::DetectFormat(codestream), image::ImageFormat::kJpeg2000);
  const std::vector<uint8_t> p7 = {'P', '7', '\n'};
  EXPECT_EQ(image::DetectFormat(p7), image::ImageFormat::kUnknown);
}

}  // namespace
}  // namespace onnxkit::testing
