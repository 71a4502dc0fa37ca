package ops

import "github.com/octetml/octet/graph"

// The kinds of this package's ops, which a compiler pass matches
// (graph.Node.Is, passes.Pattern.Kind); each is also the op's Type.
var (
	KindLinear                   = graph.NewKind("Linear")
	KindMatMul                   = graph.NewKind("MatMul")
	KindBatchMatMul              = graph.NewKind("BatchMatMul")
	KindAdd                      = graph.NewKind("Add")
	KindSub                      = graph.NewKind("Sub")
	KindMul                      = graph.NewKind("Mul")
	KindDiv                      = graph.NewKind("Div")
	KindNeg                      = graph.NewKind("Neg")
	KindScale                    = graph.NewKind("Scale")
	KindReLU                     = graph.NewKind("ReLU")
	KindGELU                     = graph.NewKind("GELU")
	KindTanh                     = graph.NewKind("Tanh")
	KindExp                      = graph.NewKind("Exp")
	KindLog                      = graph.NewKind("Log")
	KindSqrt                     = graph.NewKind("Sqrt")
	KindSiLU                     = graph.NewKind("SiLU")
	KindSigmoid                  = graph.NewKind("Sigmoid")
	KindSwiGLU                   = graph.NewKind("SwiGLU")
	KindSwiGLUGrad               = graph.NewKind("SwiGLUGrad")
	KindConcat                   = graph.NewKind("Concat")
	KindRMSNorm                  = graph.NewKind("RMSNorm")
	KindRMSNormGrad              = graph.NewKind("RMSNormGrad")
	KindRMSNormGradGamma         = graph.NewKind("RMSNormGradGamma")
	KindRMSNormQuantize          = graph.NewKind("RMSNormQuantize")
	KindGELUQuantize             = graph.NewKind("GELUQuantize")
	KindNegGrad                  = graph.NewKind("NegGrad")
	KindScaleGrad                = graph.NewKind("ScaleGrad")
	KindReLUGrad                 = graph.NewKind("ReLUGrad")
	KindGELUGrad                 = graph.NewKind("GELUGrad")
	KindTanhGrad                 = graph.NewKind("TanhGrad")
	KindExpGrad                  = graph.NewKind("ExpGrad")
	KindLogGrad                  = graph.NewKind("LogGrad")
	KindSqrtGrad                 = graph.NewKind("SqrtGrad")
	KindSiLUGrad                 = graph.NewKind("SiLUGrad")
	KindSigmoidGrad              = graph.NewKind("SigmoidGrad")
	KindSum                      = graph.NewKind("Sum")
	KindMean                     = graph.NewKind("Mean")
	KindSumTo                    = graph.NewKind("SumTo")
	KindBroadcastTo              = graph.NewKind("BroadcastTo")
	KindReshape                  = graph.NewKind("Reshape")
	KindPermute                  = graph.NewKind("Permute")
	KindSlice                    = graph.NewKind("Slice")
	KindSliceGrad                = graph.NewKind("SliceGrad")
	KindSoftmax                  = graph.NewKind("Softmax")
	KindLogSoftmax               = graph.NewKind("LogSoftmax")
	KindSoftmaxGrad              = graph.NewKind("SoftmaxGrad")
	KindLogSoftmaxGrad           = graph.NewKind("LogSoftmaxGrad")
	KindCrossEntropy             = graph.NewKind("CrossEntropy")
	KindCrossEntropyGrad         = graph.NewKind("CrossEntropyGrad")
	KindLayerNorm                = graph.NewKind("LayerNorm")
	KindLayerNormGrad            = graph.NewKind("LayerNormGrad")
	KindLayerNormGradGamma       = graph.NewKind("LayerNormGradGamma")
	KindLayerNormGradBeta        = graph.NewKind("LayerNormGradBeta")
	KindLayerNormQuantize        = graph.NewKind("LayerNormQuantize")
	KindCrossEntropyGradQuantize = graph.NewKind("CrossEntropyGradQuantize")
	KindClassifierCrossEntropy   = graph.NewKind("ClassifierCrossEntropy")
	KindClassifierLoss           = graph.NewKind("ClassifierLoss")
	KindEmbedding                = graph.NewKind("Embedding")
	KindEmbeddingGrad            = graph.NewKind("EmbeddingGrad")
	KindTopK                     = graph.NewKind("TopK")
	KindGatherLast               = graph.NewKind("GatherLast")
	KindGatherLastGrad           = graph.NewKind("GatherLastGrad")
	KindExpertCounts             = graph.NewKind("ExpertCounts")
	KindDispatch                 = graph.NewKind("Dispatch")
	KindDispatchGrad             = graph.NewKind("DispatchGrad")
	KindCombine                  = graph.NewKind("Combine")
	KindCombineGradRows          = graph.NewKind("CombineGradRows")
	KindCombineGradWeights       = graph.NewKind("CombineGradWeights")
	KindGroupedLinear            = graph.NewKind("GroupedLinear")
	KindGroupedLinearGradX       = graph.NewKind("GroupedLinearGradX")
	KindGroupedLinearGradW       = graph.NewKind("GroupedLinearGradW")
	KindGroupedScaledMatMul      = graph.NewKind("GroupedScaledMatMul")
	KindLogSumExp                = graph.NewKind("LogSumExp")
	KindLogSumExpGrad            = graph.NewKind("LogSumExpGrad")
	KindExpertShare              = graph.NewKind("ExpertShare")
	KindDropout                  = graph.NewKind("Dropout")
	KindDropoutMask              = graph.NewKind("DropoutMask")
	KindCausalMask               = graph.NewKind("CausalMask")
	KindCausalMaskGrad           = graph.NewKind("CausalMaskGrad")
	KindCausalAttention          = graph.NewKind("CausalAttention")
	KindCausalAttentionGrad      = graph.NewKind("CausalAttentionGrad")
	KindQuantize                 = graph.NewKind("Quantize")
	KindScaledMatMul             = graph.NewKind("ScaledMatMul")
	KindBF16MatMul               = graph.NewKind("BF16MatMul")
	KindFakeQuant                = graph.NewKind("FakeQuant")
	KindDequantize               = graph.NewKind("Dequantize")
	KindTensorStats              = graph.NewKind("TensorStats")
	KindFP8TensorStats           = graph.NewKind("FP8TensorStats")
	KindAllGather                = graph.NewKind("AllGather")
	KindFP8AllGather             = graph.NewKind("FP8AllGather")
	KindEPSlice                  = graph.NewKind("EPSlice")
	KindEPGather                 = graph.NewKind("EPGather")
	KindEPPlan                   = graph.NewKind("EPPlan")
	KindEPDispatch               = graph.NewKind("EPDispatch")
	KindEPLocalCounts            = graph.NewKind("EPLocalCounts")
	KindEPToOwners               = graph.NewKind("EPToOwners")
	KindEPFromOwners             = graph.NewKind("EPFromOwners")
	KindFusedElementwise         = graph.NewKind("FusedElementwise")
	KindFusedGEMM                = graph.NewKind("FusedGEMM")
	KindMaskedMean               = graph.NewKind("MaskedMean")
	KindMaskedMeanGrad           = graph.NewKind("MaskedMeanGrad")
	KindMSELoss                  = graph.NewKind("MSELoss")
	KindMSELossGrad              = graph.NewKind("MSELossGrad")
	KindL1Loss                   = graph.NewKind("L1Loss")
	KindL1LossGrad               = graph.NewKind("L1LossGrad")
	KindHuberLoss                = graph.NewKind("HuberLoss")
	KindHuberLossGrad            = graph.NewKind("HuberLossGrad")
	KindBCEWithLogits            = graph.NewKind("BCEWithLogits")
	KindBCEWithLogitsGrad        = graph.NewKind("BCEWithLogitsGrad")
)

var unaryKinds = [...]graph.Kind{KindNeg, KindScale, KindReLU, KindGELU, KindTanh, KindExp, KindLog, KindSqrt, KindSiLU, KindSigmoid}
var unaryGradKinds = [...]graph.Kind{KindNegGrad, KindScaleGrad, KindReLUGrad, KindGELUGrad, KindTanhGrad, KindExpGrad, KindLogGrad, KindSqrtGrad, KindSiLUGrad, KindSigmoidGrad}
var binaryKinds = [...]graph.Kind{KindAdd, KindSub, KindMul, KindDiv}

// GEMMKind returns the kind of n's GEMM: its own for a GEMM (Linear,
// MatMul, BatchMatMul, ScaledMatMul, BF16MatMul), that of the GEMM a fused
// node starts from (ScaledMatMul for "ScaledMatMul+GELUGrad"), the zero
// Kind otherwise.
func GEMMKind(n *graph.Node) graph.Kind {
	if n == nil {
		return graph.Kind{}
	}
	switch op := n.Op().(type) {
	case fusedGEMMOp:
		return graph.KindOf(op.gemm)
	case linearOp, matMulOp, scaledMatMulOp, bf16MatMulOp:
		return graph.KindOf(op)
	}
	return graph.Kind{}
}

// GEMMFlops returns the floating-point operations of n's GEMM, 2·m·n·k
// summed over a batch (a multiply and an add per term), for a GEMM node
// or a fused node that starts from one; ok is false for any other node.
// Benchmarks divide it by a step's time to tell how close the step runs
// to the GEMM rate.
func GEMMFlops(n *graph.Node) (flops int64, ok bool) {
	if n != nil && n.Is(KindClassifierCrossEntropy) {
		xs := n.Input(0).Shape()
		return 2 * int64(n.Shape().Numel()) * int64(xs[len(xs)-1]), true
	}
	if GEMMKind(n).IsZero() {
		return 0, false
	}
	op, in := n.Op(), n.Inputs()
	if f, isFused := op.(fusedGEMMOp); isFused {
		op = f.gemm
	}
	var k int
	as := in[0].Shape()
	switch o := op.(type) {
	case linearOp:
		k = as[len(as)-1]
	case matMulOp:
		k = as[len(as)-1]
		if o.transA {
			k = as[len(as)-2]
		}
	case scaledMatMulOp:
		_, _, _, k, _ = gemm2D("", as, in[1].Shape(), o.transA, o.transB)
	case bf16MatMulOp:
		_, _, _, k, _ = gemm2D("", as, in[1].Shape(), o.transA, o.transB)
	}
	return 2 * int64(n.Shape().Numel()) * int64(k), true
}
