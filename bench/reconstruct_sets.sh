# Sourced by bench/reconstruct_compare.sh and bench/reconstruct_seeds.sh: the images,
# ground truth (sfm_eval's options) and ground-truth intrinsics (`reconstruct --intrinsics`,
# empty where the set has none) of each multi-view set under $data
# (TIEPOINT_SHARED_DATA/multiview). The set "rendered" is the scene `tiepoint render-scene`
# draws (8 views of 640 x 480, known cameras), rendered on first use under $work (the
# caller's scratch folder) by $tp: no data needed. "rendered60": 60 views of 800 x 600 of
# another of its scenes (seed 7), a larger problem (about 46,000 points and 226,000
# observations), reconstructed with `--pairs sequential:8` (set_reconstruct_args, which
# model_ba_compare.sh reads). "fountain2": fountain-P11's photos 0001 and 0005 alone (the
# two of shared/data's strecha_fountain_pair), a two-photo reconstruction.
rendered_scene() {
  local d=$work/rendered-scene
  [ -e "$d/scene_par.txt" ] || "$tp" render-scene -o "$d" --views 8 --width 640 --height 480 > /dev/null
  echo "$d"
}
rendered60_scene() {
  local d=$work/rendered60-scene
  [ -e "$d/scene_par.txt" ] || "$tp" render-scene -o "$d" --views 60 --width 800 --height 600 --seed 7 -q > /dev/null
  echo "$d"
}
# More `tiepoint reconstruct` options a set needs (its pair selection).
set_reconstruct_args() {
  case $1 in
    rendered60) echo "--pairs sequential:8" ;;
    *) echo "" ;;
  esac
}
set_images() {
  case $1 in
    temple) ls "$data"/middlebury/templeSparseRing/*.png ;;
    dino) ls "$data"/middlebury/dinoSparseRing/*.png ;;
    fountain) ls "$data"/strecha_fountain_p11/images/*.jpg ;;
    fountain2) ls "$data"/strecha_fountain_p11/images/000[15].jpg ;;
    balbianello) ls "$data"/gtsam_balbianello/*.jpg ;;
    kitti) ls "$data"/kitti_odometry_00_excerpt/sequences/00/image_0/*.png ;;
    rendered) ls "$(rendered_scene)"/*.png ;;
    rendered60) ls "$(rendered60_scene)"/*.png ;;
  esac
}
set_gt() {
  case $1 in
    temple) echo "--gt-par $(ls "$data"/middlebury/templeSparseRing/*_par.txt)" ;;
    dino) echo "--gt-par $(ls "$data"/middlebury/dinoSparseRing/*_par.txt)" ;;
    fountain|fountain2) echo "--gt-par $data/strecha_fountain_p11/fountain_par_DERIVED.txt" ;;
    balbianello) echo "--gt-bundler $data/gtsam_balbianello/Balbianello.out --names $(cd "$data"/gtsam_balbianello && ls *.jpg | paste -sd,)" ;;
    kitti) echo "--gt-kitti $data/kitti_odometry_00_excerpt/poses/00.txt" ;;
    rendered) echo "--gt-par $(rendered_scene)/scene_par.txt" ;;
    rendered60) echo "--gt-par $(rendered60_scene)/scene_par.txt" ;;
  esac
}
set_intrinsics() {
  case $1 in
    temple) ls "$data"/middlebury/templeSparseRing/*_par.txt ;;
    dino) ls "$data"/middlebury/dinoSparseRing/*_par.txt ;;
    fountain|fountain2) echo "$data/strecha_fountain_p11/fountain_par_DERIVED.txt" ;;
    rendered) echo "$(rendered_scene)/scene_par.txt" ;;
    rendered60) echo "$(rendered60_scene)/scene_par.txt" ;;
    *) echo "" ;;
  esac
}
